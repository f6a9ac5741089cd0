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

// deriveCases finds and keeps t's differential cases in sb (a derivation
// sandbox with the kit installed and the hidden tests copied in, files
// being their unrewritten sources). It leaves the workdir at base.
func deriveCases(ctx context.Context, sb sandbox.Sandbox, t Task, surf Surface, files map[string][]byte, base string) (kept []Probe, tried int, err error) {
	if err := copyTests(ctx, sb, t, files); err != nil {
		return nil, 0, err
	}
	if err := sb.CopyIn(ctx, surf.Stdlib, strings.NewReader(string(tarFiles([]tarFile{{"rollcage_cases.py", kitCases, 0o644, 0}})))); err != nil {
		return nil, 0, fmt.Errorf("install the case finder: %w", err)
	}
	var args []string
	for _, p := range testPaths(t, files) {
		if isTestFile(p) {
			args = append(args, shellQuote(p))
		}
	}
	if len(args) == 0 {
		return nil, 0, nil
	}
	py := interpreter(t.TestCommand)
	finder := path.Join(surf.Stdlib, "rollcage_cases.py")
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Session: submitSession, Timeout: time.Minute, MaxOutput: 8 << 20,
		Command: cleanEnv("/nonexistent") + " " + shellQuote("cd / && exec "+shellQuote(py)+" -I -S "+shellQuote(finder)+" find "+strings.Join(args, " "))})
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
	runAt := func(ref string) (map[int]caseOutput, error) {
		if err := checkout(ctx, sb, t, ref); err != nil {
			return nil, err
		}
		script := "cd " + shellQuote(t.Workdir) + " && exec " + shellQuote(py) + " -s " + shellQuote(finder) + " run " + casesFile
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Session: gradeSession, Timeout: 2 * time.Minute, MaxOutput: 8 << 20,
			Command: cleanEnv("/nonexistent") + " " + shellQuote(script)})
		if err != nil {
			return nil, fmt.Errorf("run differential cases at %s: %w", ref, err)
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
	fix1, err := runAt(t.UpstreamFixRef)
	if err != nil {
		return nil, 0, err
	}
	fix2, err := runAt(t.UpstreamFixRef)
	if err != nil {
		return nil, 0, err
	}
	onBase, err := runAt(base)
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
		rel := strings.TrimPrefix(strings.TrimPrefix(c.File, path.Clean(t.HiddenTestsDest)), "/")
		src := strings.Replace(c.Value, "def __ROLLCAGE_CASE__(", "def "+probePlaceholder+"(", 1)
		kept = append(kept, Probe{File: rel, Test: c.Test, Source: src, Case: true, Expected: enc, Desc: c.Desc})
	}
	return kept, len(cands), nil
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

// CaseNotes says, per hidden test of t, what keeps the differential cases
// from perturbing it (fixtures, decorators other than literal parametrize
// lists, methods of a class) or makes its cases depend on the world (time,
// randomness, files, processes: such a case is kept only where the
// reference's output repeats, and its effects run once per case). Read
// from the sources, for `rollcage tasks check`; the derivation decides.
func CaseNotes(t Task, hidden fs.FS) ([]string, error) {
	if t.HiddenTests == "" || t.UpstreamFixRef == "" || t.TestFramework() != FrameworkPytest || t.Reward == RewardSummary || t.RewardFile != "" {
		return nil, nil
	}
	files, err := hiddenFiles(hidden, t.HiddenTests)
	if err != nil {
		return nil, err
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
