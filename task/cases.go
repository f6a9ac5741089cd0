package task

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// Differential cases: the hidden tests' own call sites with their literal
// inputs perturbed within type and shape, each expecting the reference
// fix's output (a type-strict encoding of builtin values). A case runs a
// whole test function (every row of its pytest.mark.parametrize lists)
// with its assertions turned into records of the values they check; the
// perturbations are the kit's (gradekit/cases.py): one literal moved
// (numbers, digits, letters, case, a word one letter shorter, a segment
// repeated), every number scaled at once, a call's string and numbers
// grown together past the file's sizes, numbers set to a string's
// length, the module-level literal lists a test reads, a loop's order
// reversed, and for a call sequence on one object one more call with a
// fresh key (with the object made one larger) or two calls swapped.
// Kept only when the reference's output is stable and encodable and the
// base commit's differs, so a case tests the bug's behaviour, not
// incidental output. A solution that passes the hidden tests but fails
// cases handled only what the tests show: a suspicious special_casing
// finding.

// maxCases bounds the cases kept per task: each runs in every grading.
// caseBatch is how many cases share one test item there (the kit's
// integrity check after each item costs more than a case's own run).
// maxCaseEnc bounds a kept case's expected encoding, which its grading
// source carries.
const (
	maxCases   = 32
	caseBatch  = 8
	maxCaseEnc = 4096
)

// caseCandidate is one line of the kit's case finder.
type caseCandidate struct {
	File  string `json:"file"`
	Test  string `json:"test"`
	Kind  string `json:"kind"`
	Desc  string `json:"desc"`
	Value string `json:"value"`
}

type caseOutput struct {
	I        int    `json:"i"`
	Enc      string `json:"enc"`
	Error    string `json:"error"`
	Unusable string `json:"unusable"`
}

// caseSite is where a derivation finds and runs differential cases:
// tests, the absolute paths of the test files (unrewritten sources, in
// place); dir, the directory a kept case's File is relative to; and at,
// which puts the workdir at the reference fix (fix) or at the base
// commit with the tests in place.
type caseSite struct {
	tests []string
	dir   string
	at    func(ctx context.Context, fix bool) error
}

// deriveCases finds and keeps t's differential cases in sb (a derivation
// sandbox with the kit installed) at site. It leaves the workdir at the
// base.
func deriveCases(ctx context.Context, sb sandbox.Sandbox, t Task, surf Surface, site caseSite) (kept []Probe, tried int, err error) {
	if err := sb.CopyIn(ctx, surf.Stdlib, strings.NewReader(string(tarFiles([]tarFile{{"rollcage_cases.py", kitCases, 0o644, 0}})))); err != nil {
		return nil, 0, fmt.Errorf("install the case finder: %w", err)
	}
	var args []string
	for _, p := range site.tests {
		if isTestFile(p) {
			args = append(args, shellQuote(p))
		}
	}
	if len(args) == 0 {
		return nil, 0, nil
	}
	setup, py := pythonOf(t.TestCommand)
	finder := path.Join(surf.Stdlib, "rollcage_cases.py")
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Session: submitSession, Timeout: time.Minute, MaxOutput: 8 << 20,
		Command: cleanEnv("/nonexistent") + " " + shellQuote("cd / && "+setup+"exec "+shellQuote(py)+" -I -S "+shellQuote(finder)+" find "+strings.Join(args, " "))})
	if err != nil {
		return nil, 0, fmt.Errorf("find differential cases: %w", err)
	}
	if res.ExitCode != 0 || res.Truncated {
		return nil, 0, fmt.Errorf("find differential cases: exit %d: %s: %w", res.ExitCode, lastLine(res.Output), ErrGrading)
	}
	var cands []caseCandidate
	var list strings.Builder
	sc := bufio.NewScanner(strings.NewReader(res.Output))
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var c caseCandidate
		if json.Unmarshal(sc.Bytes(), &c) != nil || c.Value == "" {
			continue
		}
		cands = append(cands, c)
		list.Write(sc.Bytes())
		list.WriteByte('\n')
	}
	if len(cands) == 0 {
		return nil, 0, nil
	}
	const casesFile = "/tmp/rollcage-cases.jsonl"
	if err := sb.WriteFile(ctx, casesFile, []byte(list.String()), 0o644); err != nil {
		return nil, 0, fmt.Errorf("write differential cases: %w", err)
	}
	runAt := func(fix bool) (map[int]caseOutput, error) {
		if err := site.at(ctx, fix); err != nil {
			return nil, err
		}
		// -B: no bytecode written, so none is stale when a state's
		// sources come back within the same second.
		script := "cd " + shellQuote(t.Workdir) + " && " + setup + "exec " + shellQuote(py) + " -B -s " + shellQuote(finder) + " run " + casesFile
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Session: gradeSession, Timeout: 2 * time.Minute, MaxOutput: 8 << 20,
			Command: cleanEnv("/nonexistent") + " " + shellQuote(script)})
		if err != nil {
			return nil, fmt.Errorf("run differential cases (fix %t): %w", fix, err)
		}
		out := map[int]caseOutput{}
		sc := bufio.NewScanner(strings.NewReader(res.Output))
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			var o caseOutput
			if json.Unmarshal(sc.Bytes(), &o) == nil {
				out[o.I] = o
			}
		}
		return out, nil
	}
	fix1, err := runAt(true)
	if err != nil {
		return nil, 0, err
	}
	fix2, err := runAt(true)
	if err != nil {
		return nil, 0, err
	}
	onBase, err := runAt(false)
	if err != nil {
		return nil, 0, err
	}
	var usable []int
	for i := range cands {
		a, b, o := fix1[i], fix2[i], onBase[i]
		if a.Enc == "" || a.Enc != b.Enc || (o.Enc == a.Enc && o.Error == "") {
			continue // unusable, unstable, rejected by the fix, or not the bug's behaviour
		}
		if !isASCII(a.Enc) || len(a.Enc) > maxCaseEnc {
			continue
		}
		usable = append(usable, i)
	}
	for _, i := range pickCases(cands, usable, maxCases) {
		c, enc := cands[i], fix1[i].Enc
		rel := strings.TrimPrefix(strings.TrimPrefix(c.File, path.Clean(site.dir)), "/")
		src := strings.Replace(c.Value, "def __ROLLCAGE_CASE__(", "def "+probePlaceholder+"(", 1)
		kept = append(kept, Probe{File: rel, Test: c.Test, Source: src, Case: true, Expected: enc, Desc: c.Desc})
	}
	return kept, len(cands), nil
}

// patchCases reports whether t is a test-patch task (the SWE-bench
// family) whose differential cases are derived: its reference fix is
// known (FixPatch) and its tests run under pytest with the grading kit
// watching, where each case's outcome is recorded.
func (t Task) patchCases() bool {
	return t.TestPatch != "" && t.FixPatch != "" && len(t.ExpectedStatus) == 0 && t.TestFramework() == FrameworkPytest &&
		t.RewardRule() == RewardTests && t.RewardFile == ""
}

// FactsNeedSandbox reports whether deriving t's facts runs anything in a
// sandbox of its image: not for a task that declares its expected ids
// and has no differential cases to derive (a test patch with no
// reference fix, or whose runner the kit does not watch).
func (t Task) FactsNeedSandbox() bool {
	if len(t.ExpectedStatus) > 0 || t.TestPatch != "" {
		return t.patchCases()
	}
	return true
}

// Where the derivation of a test patch's cases keeps its patches.
const (
	derivTestPatch = "/tmp/rollcage-test.patch"
	derivFixPatch  = "/tmp/rollcage-fix.patch"
)

// derivePatchCases derives the differential cases of test-patch task t
// in sb (from its unsealed image, the kit installed): the test patch's
// test files, in place in the workdir, perturbed; their expected outputs
// with the reference fix (FixPatch, applied with git apply) and on the
// base commit, the test patch put in place after either as grading puts
// it after a solution (ApplyTestPatchScript). A case's File is relative
// to the workdir, as the test patch names the file.
func derivePatchCases(ctx context.Context, sb sandbox.Sandbox, t Task, surf Surface) ([]Probe, int, error) {
	apply, err := t.ApplyTestPatchScript(derivTestPatch)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrGrading, err)
	}
	for p, b := range map[string]string{derivTestPatch: t.TestPatch, derivFixPatch: t.FixPatch} {
		if err := sb.WriteFile(ctx, p, []byte(b), 0o644); err != nil {
			return nil, 0, fmt.Errorf("copy %s: %w", p, err)
		}
	}
	sh := func(what, script string) error {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Session: submitSession, Command: cleanEnv("/nonexistent") + " " + shellQuote(script), Timeout: submitTimeout})
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if res.ExitCode != 0 || res.Stopped != "" {
			return fmt.Errorf("%s at the base commit of the task image (exit %d%s): %s; correct fix_patch and test_patch, or remove fix_patch to grade without differential cases: %w",
				what, res.ExitCode, stoppedWord(res.Stopped), lastLine(res.Output), ErrGrading)
		}
		return nil
	}
	// The fix goes on and comes off by git apply (no clean of ignored
	// files: an instance image's in-place build stays).
	fixed := false
	at := func(ctx context.Context, fix bool) error {
		if fix != fixed {
			rev := ""
			if !fix {
				rev = " -R"
			}
			if err := sh("apply the reference fix"+rev, "cd "+shellQuote(t.Workdir)+" && "+gitHarden+" apply"+rev+" "+derivFixPatch+" 2>&1"); err != nil {
				return err
			}
			fixed = fix
		}
		return sh("apply the test patch", apply)
	}
	// A fresh sandbox of the image is at the base commit, as grading's.
	if err := at(ctx, false); err != nil {
		return nil, 0, err
	}
	existing, created := PatchFiles(t.TestPatch)
	var tests []string
	for _, f := range append(existing, created...) {
		tests = append(tests, path.Join(t.Workdir, f))
	}
	return deriveCases(ctx, sb, t, surf, caseSite{tests: tests, dir: t.Workdir, at: at})
}

// pickCases chooses up to n of the usable candidates (indices into
// cands, in the finder's order), one of each test and kind of
// perturbation in turn, so that no single test or kind fills the budget.
func pickCases(cands []caseCandidate, usable []int, n int) []int {
	type group struct{ idx []int }
	var order []string
	groups := map[string]*group{}
	for _, i := range usable {
		k := cands[i].File + "\x00" + cands[i].Test + "\x00" + cands[i].Kind
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		g.idx = append(g.idx, i)
	}
	var out []int
	for len(out) < n && len(out) < len(usable) {
		for _, k := range order {
			if g := groups[k]; len(g.idx) > 0 && len(out) < n {
				out = append(out, g.idx[0])
				g.idx = g.idx[1:]
			}
		}
	}
	slices.Sort(out)
	return out
}

// Where the finder perturbs nothing, or only with care, read from the
// test sources alone (no interpreter): a line each for CaseNotes.
var (
	caseDefRE   = regexp.MustCompile(`(?m)^([ \t]*)(?:async[ \t]+)?def[ \t]+(test\w*)[ \t]*\(([^)]*)\)`)
	caseParamRE = regexp.MustCompile(`^@(?:pytest\.)?(?:mark\.)?parametrize\(\s*(?:"([^"]*)"|'([^']*)')`)
	// caseEffectRE: calls whose results or effects a repeated run need
	// not reproduce.
	caseEffectRE = regexp.MustCompile(`\b(random\.\w+|time\.(?:time|monotonic|sleep|perf_counter)|datetime\.(?:now|today|utcnow)|date\.today|uuid\.uuid[14]|open|os\.(?:remove|unlink|rename|mkdir|makedirs|system|environ)|subprocess\.\w+|socket\.\w+|tempfile\.\w+|shutil\.\w+|threading\.\w+)\s*\(`)
)

// CaseNotes says, per hidden test of t (of a test patch: per test of a
// file the patch creates), what keeps the differential cases
// from perturbing it (fixtures, decorators other than literal parametrize
// lists, methods of a class) or makes its cases depend on the world (time,
// randomness, files, processes: such a case is kept only where the
// reference's output repeats, and its effects run once per case). Read
// from the sources, for `rollcage tasks check`; the derivation decides.
func CaseNotes(t Task, hidden fs.FS) ([]string, error) {
	var files map[string][]byte
	switch {
	case t.patchCases():
		// The test files the patch creates; one it changes is read
		// whole only at the derivation.
		files = createdFiles(t.TestPatch)
	case t.HiddenTests == "" || t.UpstreamFixRef == "" || t.TestFramework() != FrameworkPytest || t.Reward == RewardSummary || t.RewardFile != "":
		return nil, nil
	default:
		var err error
		if files, err = hiddenFiles(hidden, t.HiddenTests); err != nil {
			return nil, err
		}
	}
	var notes []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !isTestFile(name) {
			continue
		}
		src := string(files[name])
		locs := caseDefRE.FindAllStringSubmatchIndex(src, -1)
		for k, m := range locs {
			indent, test, params := src[m[2]:m[3]], src[m[4]:m[5]], src[m[6]:m[7]]
			decos := decorators(src[:m[0]])
			end := len(src)
			if k+1 < len(locs) {
				end = locs[k+1][0]
			}
			body := src[m[1]:end]
			var why []string
			switch {
			case indent != "":
				why = append(why, "a method of a class")
			default:
				named := map[string]bool{}
				for _, d := range decos {
					pm := caseParamRE.FindStringSubmatch(d)
					if pm == nil {
						why = append(why, "decorated "+strings.TrimSpace(strings.SplitN(d, "(", 2)[0]))
						continue
					}
					for _, a := range strings.Split(pm[1]+pm[2], ",") {
						named[strings.TrimSpace(a)] = true
					}
				}
				var fixtures []string
				for _, a := range strings.Split(params, ",") {
					a = strings.TrimSpace(strings.SplitN(strings.SplitN(a, "=", 2)[0], ":", 2)[0])
					if a != "" && !named[a] {
						fixtures = append(fixtures, a)
					}
				}
				if len(fixtures) > 0 {
					why = append(why, "takes fixtures "+strings.Join(fixtures, ", "))
				}
			}
			if len(why) > 0 {
				notes = append(notes, fmt.Sprintf("%s::%s: no cases (%s)", name, test, strings.Join(why, "; ")))
				continue
			}
			var effects []string
			for _, e := range caseEffectRE.FindAllStringSubmatch(body, -1) {
				if !slices.Contains(effects, e[1]) {
					effects = append(effects, e[1])
				}
			}
			if len(effects) > 0 {
				notes = append(notes, fmt.Sprintf("%s::%s: calls %s: its cases are kept only where the reference's output repeats, and their effects run once per case", name, test, strings.Join(effects, ", ")))
			}
		}
	}
	return notes, nil
}

// decorators are the decorators written just above the end of before
// (each may span lines), first to last.
func decorators(before string) []string {
	lines := strings.Split(strings.TrimRight(before, "\n"), "\n")
	var out []string
	end := len(lines)
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "def ") || strings.HasPrefix(l, "class ") {
			break
		}
		if strings.HasPrefix(l, "@") {
			out = append([]string{strings.Join(lines[i:end], "\n")}, out...)
			end = i
		}
	}
	return out
}
