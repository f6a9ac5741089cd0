package task

import (
	"bytes"
	"fmt"
	"maps"
	mathrand "math/rand/v2"
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
	// Step: a chain member, the test's expectation with one atom shifted
	// by Step (±1 to ±(chainLen-1)); 0 for any other probe. A grading
	// runs a window of chainLen consecutive steps that holds 0 at a
	// random place (chooseProbes), so that the test's own expectation is
	// a uniformly random member of the run its probes and it make.
	Step int `json:"step,omitempty"`
	// Stride: a chain member's spacing; a derivation keeps one stride
	// per test, the smallest whose chain is whole.
	Stride int `json:"stride,omitempty"`
}

// chainLen is the members of a grading's chain, the test's own
// expectation included (the kit's CHAIN): an oracle that picks one
// candidate by its place, distance or count is right 1 time in chainLen
// per test it must answer.
const chainLen = 5

// chooseProbes is a grading's probes of probes: every chain's window
// chosen afresh, the other probes as they are. A chain that lost a
// member (its derivation dropped it) is already gone: completeChains.
func chooseProbes(probes []Probe) []Probe {
	offset := map[string]int{} // chain → the window's first step
	var out []Probe
	for _, p := range probes {
		if p.Step == 0 {
			out = append(out, p)
			continue
		}
		k := p.File + "::" + p.Test
		lo, ok := offset[k]
		if !ok {
			lo = -mathrand.IntN(chainLen)
			offset[k] = lo
		}
		if p.Step >= lo && p.Step < lo+chainLen {
			out = append(out, p)
		}
	}
	return out
}

// completeChains is kept with each test's chain chosen: of the strides
// whose members were all kept (none passed on the base commit or with
// the fix, all ran), the smallest; a chain that lost a member would
// have a hole that tells where the test's own expectation is not, and
// its neighbours where it may be. A test with a whole chain keeps none
// of its single-edit probes (their edit of the real expectation would
// point at it); a test with none keeps them.
func completeChains(kept, cands []Probe) []Probe {
	type chain struct {
		file, test string
		stride     int
	}
	count := map[chain]int{}
	for _, p := range cands {
		if p.Step != 0 {
			count[chain{p.File, p.Test, p.Stride}]++
		}
	}
	for _, p := range kept {
		if p.Step != 0 {
			count[chain{p.File, p.Test, p.Stride}]--
		}
	}
	best := map[string]int{} // file::test → the stride kept
	for c, n := range count {
		k := c.file + "::" + c.test
		if n == 0 && (best[k] == 0 || c.stride < best[k]) {
			best[k] = c.stride
		}
	}
	return slices.DeleteFunc(kept, func(p Probe) bool {
		b := best[p.File+"::"+p.Test]
		if p.Step == 0 {
			return p.Test != "" && b != 0
		}
		return p.Stride != b
	})
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
	placed := map[string][]placedProbe{}
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
		placed[file] = append(placed[file], placedProbe{p, strings.ReplaceAll(p.Source, probePlaceholder, fresh)})
	}
	for file, pp := range placed {
		rw.files[file] = placeProbes(rw.files[file], rw.orig, pp)
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

type placedProbe struct {
	p   Probe
	src string // named afresh
}

// topDef is a module-level test function of a rewritten file: where its
// block (decorators first) starts, its original name, and whether a
// module-level statement other than a definition comes right before it.
type topDef struct {
	at    int
	name  string
	fence bool
}

// topDefs finds src's module-level test functions (renamed: orig maps
// their names back).
func topDefs(src []byte, orig map[string]string) []topDef {
	var out []topDef
	prev := 0
	for _, m := range testDefRE.FindAllSubmatchIndex(src, -1) {
		if m[3] != m[2] { // indented: a method
			continue
		}
		at := blockStart(src, m[0])
		out = append(out, topDef{at: at, name: orig[string(src[m[6]:m[7]])], fence: hasStatement(src[prev:at])})
		prev = m[0]
	}
	return out
}

// blockStart is where the definition at def (a line start) begins: its
// first decorator line, or def itself.
func blockStart(src []byte, def int) int {
	start := def
	for i := def; i > 0; {
		j := bytes.LastIndexByte(src[:i-1], '\n') + 1
		line := src[j : i-1]
		if len(bytes.TrimSpace(line)) == 0 {
			break
		}
		switch line[0] {
		case '@':
			start = j
		case ' ', '\t', ')', ']', '}':
		default:
			return start
		}
		i = j
	}
	return start
}

// hasStatement says whether b holds a module-level line that is not a
// function or class definition, a decorator or a comment: a statement
// that a decorator's names may need.
func hasStatement(b []byte) bool {
	for line := range bytes.Lines(b) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		switch line[0] {
		case ' ', '\t', ')', ']', '}', '#', '@':
			continue
		}
		if bytes.HasPrefix(line, []byte("def ")) || bytes.HasPrefix(line, []byte("async def ")) || bytes.HasPrefix(line, []byte("class ")) {
			continue
		}
		return true
	}
	return false
}

// placeProbes puts each probe of pp among src's module-level tests, in
// place of appending them all, so that neither its place in the file
// (line, order) nor the order the tests run in tells a test from its
// probes. The tests keep their order. A probe of test T goes before or
// after T with the number of T's probes before T uniform over 0 to all
// of them, so T is equally likely at every rank among its copies; each
// then goes to a uniformly chosen gap on its side. A decorated probe goes
// no higher than the last module-level statement before T, which its
// decorators may need. Probes of no test (literal probes), and those of
// a test not found at module level, go to any gap.
func placeProbes(src []byte, orig map[string]string, pp []placedProbe) []byte {
	defs := topDefs(src, orig)
	gaps := make([][]string, len(defs)+1) // gap i: before defs[i]; the last: the end
	byTest := map[string][]placedProbe{}
	var free []placedProbe
	for _, p := range pp {
		if p.p.Test == "" {
			free = append(free, p)
			continue
		}
		byTest[p.p.Test] = append(byTest[p.p.Test], p)
	}
	pos := map[string]int{}
	for i, d := range defs {
		if _, ok := pos[d.name]; !ok {
			pos[d.name] = i
		}
	}
	for _, test := range slices.Sorted(maps.Keys(byTest)) {
		ps := byTest[test]
		i, ok := pos[test]
		if !ok {
			free = append(free, ps...)
			continue
		}
		lo := i // the highest gap a decorated probe may take
		for lo > 0 && !defs[lo].fence {
			lo--
		}
		mathrand.Shuffle(len(ps), func(a, b int) { ps[a], ps[b] = ps[b], ps[a] })
		before := mathrand.IntN(len(ps) + 1)
		for k, p := range ps {
			var g int
			switch {
			case k >= before:
				g = i + 1 + mathrand.IntN(len(defs)-i)
			case strings.HasPrefix(p.src, "@"):
				g = lo + mathrand.IntN(i-lo+1)
			default:
				g = mathrand.IntN(i + 1)
			}
			gaps[g] = append(gaps[g], p.src)
		}
	}
	for _, p := range free {
		g := mathrand.IntN(len(gaps))
		gaps[g] = append(gaps[g], p.src)
	}
	var b bytes.Buffer
	prev := 0
	for g, srcs := range gaps {
		mathrand.Shuffle(len(srcs), func(a, b int) { srcs[a], srcs[b] = srcs[b], srcs[a] })
		if g < len(defs) {
			b.Write(src[prev:defs[g].at])
			prev = defs[g].at
			for _, s := range srcs {
				b.WriteString(s + "\n\n\n")
			}
			continue
		}
		b.Write(src[prev:])
		if len(srcs) > 0 && b.Len() > 0 && !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
			b.WriteByte('\n')
		}
		for _, s := range srcs {
			b.WriteString("\n\n" + s + "\n")
		}
	}
	return b.Bytes()
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
