package task

import (
	"fmt"
	"strings"
)

// PlanItem is one line of what rollcage will do with a task.
type PlanItem struct {
	Key, Value string
}

// Plan says what rollcage will do with t, for `rollcage tasks check`:
// the image and workdir, what the policy is told, how the submission is
// graded, the test command, and what is kept from the policy.
func (t Task) Plan() []PlanItem {
	t = t.withDefaults()
	var p []PlanItem
	add := func(k, format string, args ...any) { p = append(p, PlanItem{k, fmt.Sprintf(format, args...)}) }
	if t.Benchmark != "" {
		add("benchmark", "%s instance %s", t.Benchmark, t.InstanceID)
	}
	seal := "not sealed (seal: false)"
	if t.Sealed() {
		seal = "sealed: nothing beyond the base commit in its history"
		if t.BaseCommit != "" {
			seal = "sealed at " + short(t.BaseCommit) + ": nothing beyond it in the history"
		}
	}
	if t.BuildContext != "" {
		add("image", "%s (built from %s/Dockerfile when missing, never pulled; %s)", t.Image, t.BuildContext, seal)
	} else {
		add("image", "%s (never pulled; %s)", t.Image, seal)
	}
	add("workdir", "%s", t.Workdir)
	first, _, _ := strings.Cut(strings.TrimSpace(t.Instruction), "\n")
	if len(first) > 72 {
		first = first[:72] + "..."
	}
	add("instruction", "%q (%d chars)%s", first, len(t.Instruction), map[bool]string{true: "; hints not shown (--hints adds them)", false: ""}[t.Hints != "" && !strings.Contains(t.Instruction, t.Hints)])

	var tests string
	switch {
	case len(t.ImageHidden) > 0:
		tests = "the image's own hidden tests (" + strings.Join(t.ImageHidden, " ") + "), deleted from the sealed image the episode runs"
	case t.TestPatch != "":
		existing, created := PatchFiles(t.TestPatch)
		tests = fmt.Sprintf("the test patch (%s: %d reset to the base commit first, %d created)", plural(len(existing)+len(created), "file"), len(existing), len(created))
	case t.HiddenTests != "":
		tests = fmt.Sprintf("the hidden tests of %s, copied to %s", t.HiddenTests, t.HiddenTestsDest)
	default:
		tests = "the repository's own tests"
	}
	how := "the submitted diff applied"
	if t.Grade == GradeSnapshot {
		how = "a snapshot of the episode's files"
	}
	add("grading", "in a fresh sandbox from the image, where no process of the policy runs: %s, then %s, then the test command", how, tests)
	switch {
	case len(t.ExpectedStatus) > 0:
		n := map[string]int{}
		for _, s := range t.ExpectedStatus {
			n[s]++
		}
		add("reward", "1 when the run reports exactly the %d expected tests, each with its expected status (%d PASSED, %d FAILED, %d ERROR), as R2E-Gym rewards", len(t.ExpectedStatus), n["PASSED"], n["FAILED"], n["ERROR"])
	case t.RewardFile != "":
		add("reward", "what the test command writes to %s (or reward.json beside it), a number in [0, 1]", t.RewardFile)
	case t.Reward == RewardSummary:
		add("reward", "1 when the test command exits 0 and pytest's summary shows passes and no failures")
	case len(t.FailToPass)+len(t.PassToPass) > 0:
		add("reward", "1 when every one of %d expected test ids (%d FAIL_TO_PASS, %d PASS_TO_PASS) is reported passed in %s's output", len(t.FailToPass)+len(t.PassToPass), len(t.FailToPass), len(t.PassToPass), t.TestFramework())
	default:
		add("reward", "1 when every test id the reference fix makes pass (FAIL_TO_PASS and PASS_TO_PASS, derived at the first grading) is reported passed")
	}
	if l := t.Limits; l != nil {
		add("limits", "agent %gs, verifier %gs, build %gs, CPUs %g, memory %d MB, storage %d MB (0: rollcage's default)", l.AgentTimeoutSec, l.VerifierTimeoutSec, l.BuildTimeoutSec, l.CPUs, l.MemoryMB, l.StorageMB)
	}
	add("watch", "%s", t.watchPlan())
	lines := strings.Split(strings.TrimSpace(t.TestCommand), "\n")
	cmd := lines[len(lines)-1]
	if len(lines) > 1 {
		cmd += fmt.Sprintf(" (after %d setup lines: %s)", len(lines)-1, strings.Join(lines[:len(lines)-1], "; "))
	}
	add("command", "%s", cmd)

	var kept []string
	if t.TestPatch != "" {
		kept = append(kept, fmt.Sprintf("test patch (%s, hidden-test content)", plural(len(AddedLines(t.TestPatch)), "added line")))
	}
	if t.FixPatch != "" {
		kept = append(kept, fmt.Sprintf("reference fix (%s, never in the sandbox)", plural(len(AddedLines(t.FixPatch)), "added line")))
	}
	if t.BugPatch != "" {
		kept = append(kept, fmt.Sprintf("bug patch (%s, which a fix restores)", plural(len(RemovedLines(t.BugPatch)), "removed line")))
	}
	if t.HiddenTests != "" {
		kept = append(kept, "hidden tests outside the sandbox until grading")
	}
	if len(t.ImageHidden) > 0 {
		kept = append(kept, "image's hidden tests deleted from the episode's image: "+strings.Join(t.ImageHidden, " "))
	}
	if t.SolutionDir != "" {
		kept = append(kept, "reference solution "+t.SolutionDir+" (never in the sandbox)")
	}
	if len(t.ProtectedPaths) > 0 {
		kept = append(kept, "protected paths "+strings.Join(t.ProtectedPaths, " "))
	}
	if len(t.VisibleTests) > 0 {
		kept = append(kept, "visible tests unchanged: "+strings.Join(t.VisibleTests, " "))
	}
	if t.UpstreamFixRef != "" {
		kept = append(kept, "upstream fix "+t.UpstreamFixRef)
	}
	if len(kept) == 0 {
		kept = append(kept, "nothing beyond canaries")
	}
	add("protected", "%s", strings.Join(kept, "; "))
	return p
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// watchPlan says what of the grading's protections apply to t: the
// integrity watch, known-answer probes and differential cases.
func (t Task) watchPlan() string {
	switch {
	case t.RewardFile != "":
		return "the verifier runs inside the submitted filesystem, whose interpreter and tools the solution could replace; integrity watched in any pytest it runs where the image has Python (forged outcomes make the reward 0), else unavailable; no probes or differential cases"
	case t.Reward == RewardSummary:
		return "none: the summary line is the solution's to write (reward: summary)"
	case t.TestFramework() != FrameworkPytest:
		return "integrity unavailable: " + t.TestFramework() + "'s log is read, which the solution's code can write; no probes or differential cases for " + t.TestFramework()
	case len(t.ExpectedStatus) > 0:
		return "integrity watched (the grading kit in the pytest process; where the test command runs no pytest under it, the log is read as R2E-Gym reads it, integrity unavailable); no probes or differential cases"
	case t.patchCases():
		return "integrity watched (the grading kit in the pytest process); literal known-answer probes added to the test patch's test files; differential cases: the test patch's tests run with their literal inputs perturbed, kept where the reference fix (fix_patch) and the base commit differ (derived once per image in a sandbox of the unsealed image)"
	case t.TestPatch != "":
		return "integrity watched (the grading kit in the pytest process); literal known-answer probes added to the test patch's test files; no differential cases (no reference fix: fix_patch is empty)"
	}
	probes := "known-answer probes from the hidden tests' == assertions, kept when they fail with the reference fix"
	cases := "differential cases: the hidden tests run with their literal inputs perturbed, kept where the reference fix and the base commit differ"
	if t.UpstreamFixRef == "" {
		probes = "literal known-answer probes only (no reference fix to check perturbed ones against)"
		cases = "no differential cases (no reference fix)"
	}
	return "integrity watched (the grading kit in the pytest process); " + probes + "; " + cases + " (Python test files only; a test with fixtures, or parameters other than literal pytest.mark.parametrize lists, gives no cases; the cases lines name them)"
}
