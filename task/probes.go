package task

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Probe is a known-answer test added to a grading: MustFail probes fail
// for every solution (a hidden test's own assertion with its expectation
// moved off, or a test that simply fails), MustPass probes pass for every
// solution. A must-fail probe reported passed, skipped or missing, or a
// must-pass probe not passed, means the run's outcomes were forged.
type Probe struct {
	File     string `json:"file"` // the hidden test file it goes into, relative to HiddenTests
	Test     string `json:"test,omitempty"`
	Source   string `json:"source"` // a function named probePlaceholder
	MustFail bool   `json:"must_fail"`
	// Case: a differential case, not a probe: Source is a function
	// returning the values the perturbed test checks, and the case
	// passes when they encode as Expected, the reference fix's; Desc is
	// the call. Cases run in batches of caseBatch, one test item each.
	Case     bool   `json:"case,omitempty"`
	Expected string `json:"expected,omitempty"`
	Desc     string `json:"desc,omitempty"`
}

const probePlaceholder = "__ROLLCAGE_PROBE__"

// testDefRE finds the test functions pytest collects by default:
// module-level functions and methods whose name starts with "test".
var testDefRE = regexp.MustCompile(`(?m)^([ \t]*)((?:async[ \t]+)?def[ \t]+)(test\w*)([ \t]*\()`)

// rewrite is one grading's view of the hidden tests: every test function
// renamed to a fresh name, the probes appended with fresh names of the
// same shape, so that no test tells by its name what it is.
type rewrite struct {
	files map[string][]byte // hidden test file (relative) → rewritten source
	// orig maps a fresh name to the original test name; probe maps a
	// fresh probe name to its probe, batch a fresh name to the
	// differential cases its test item runs, in order.
	orig  map[string]string
	probe map[string]Probe
	batch map[string][]Probe
}

// freshName is a test name of the same shape for every test and probe.
func freshName(used map[string]bool) string {
	for {
		n := "test_" + randHex(5)
		if !used[n] {
			used[n] = true
			return n
		}
	}
}

// rewriteTests renames the test functions of the Python files among
// files and appends probes, each to the file it names (or, for probes
// naming no file, to the first test file).
func rewriteTests(files map[string][]byte, probes []Probe) (rewrite, error) {
	rw := rewrite{files: map[string][]byte{}, orig: map[string]string{}, probe: map[string]Probe{}, batch: map[string][]Probe{}}
	used := map[string]bool{}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var first string
	for _, name := range names {
		src := files[name]
		if !isTestFile(name) {
			rw.files[name] = src
			continue
		}
		if first == "" {
			first = name
		}
		out := testDefRE.ReplaceAllFunc(src, func(m []byte) []byte {
			sub := testDefRE.FindSubmatch(m)
			fresh := freshName(used)
			rw.orig[fresh] = string(sub[3])
			return []byte(string(sub[1]) + string(sub[2]) + fresh + string(sub[4]))
		})
		rw.files[name] = out
	}
	if len(probes) > 0 && first == "" {
		return rw, fmt.Errorf("probes: no Python test file among the hidden tests")
	}
	add := func(file, src string) {
		b := append([]byte(nil), rw.files[file]...)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
		b = append(b, "\n\n"+src+"\n"...)
		rw.files[file] = b
	}
	cases := map[string][]Probe{}
	var caseFiles []string
	for _, p := range probes {
		file := p.File
		if _, ok := rw.files[file]; !ok || file == "" {
			file = first
		}
		if p.Case {
			if len(cases[file]) == 0 {
				caseFiles = append(caseFiles, file)
			}
			cases[file] = append(cases[file], p)
			continue
		}
		fresh := freshName(used)
		rw.probe[fresh] = p
		add(file, strings.ReplaceAll(p.Source, probePlaceholder, fresh))
	}
	// A file's cases run caseBatch to a test item: each case a function
	// of its own (not collected), the item calling them in turn.
	for _, file := range caseFiles {
		for batch := range slices.Chunk(cases[file], caseBatch) {
			fresh := freshName(used)
			rw.batch[fresh] = batch
			var pairs strings.Builder
			for _, p := range batch {
				fn := "_" + freshName(used)
				add(file, strings.ReplaceAll(p.Source, probePlaceholder, fn))
				pairs.WriteString("(" + fn + ", " + strconv.Quote(p.Expected) + "), ")
			}
			add(file, "def "+fresh+"(request):\n    from rollcage_grade_enc import cases\n    cases(request.node, ("+pairs.String()+"))")
		}
	}
	return rw, nil
}

func isTestFile(name string) bool {
	base := name[strings.LastIndexByte(name, '/')+1:]
	return strings.HasSuffix(base, ".py") && (strings.HasPrefix(base, "test") || strings.HasSuffix(base, "_test.py"))
}

// literalProbes are the probes every grading adds whatever the task: one
// that fails and one that passes, with constants fresh per grading.
func literalProbes() []Probe {
	a, b := randHex(4), randHex(4)
	for a == b {
		b = randHex(4)
	}
	n := strconv.Itoa(int(randHex(2)[0]) + 17)
	return []Probe{
		{Source: "def " + probePlaceholder + "():\n    assert " + strconv.Quote(a) + " == " + strconv.Quote(b), MustFail: true},
		{Source: "def " + probePlaceholder + "():\n    assert " + n + " == " + n},
	}
}

// nameOf is the test function's name in a pytest node id
// ("f.py::Class::test_x[1-2]" → "test_x").
func nameOf(id string) string {
	i := strings.LastIndex(id, "::")
	name := id[i+2:]
	if j := strings.IndexByte(name, '['); j >= 0 {
		name = name[:j]
	}
	return name
}

// restoreID maps a node id of a rewritten run back to the original test's
// id, and says which probe it is when it is one.
func (rw rewrite) restoreID(id string) (orig string, probe *Probe) {
	name := nameOf(id)
	if p, ok := rw.probe[name]; ok {
		return id, &p
	}
	o, ok := rw.orig[name]
	if !ok {
		return id, nil
	}
	i := strings.LastIndex(id, "::")
	return id[:i+2] + o + id[i+2+len(name):], nil
}
