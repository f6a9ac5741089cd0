package demo

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
)

// The demo suite in SWE-bench's form: each task an instance whose
// repository is at /testbed of an image named as SWE-bench names its own,
// whose hidden tests are a test patch creating SWEBenchTestFile, and whose
// FAIL_TO_PASS and PASS_TO_PASS come from running them (DeriveInstance).
const (
	// SWEBenchTestFile is the repository file the test patch creates with
	// a demo task's hidden tests.
	SWEBenchTestFile = "tests/test_swebench_hidden.py"
	// SWEBenchTestCommand runs the hidden tests as SWE-bench's harness runs
	// pytest (-rA), in /testbed.
	SWEBenchTestCommand = "python3 -s -m pytest -rA -p no:cacheprovider " + SWEBenchTestFile
)

// Instance is one SWE-bench instance, with the two fields rollcage reads
// for a repository whose test command SWE-bench's harness does not know.
type Instance struct {
	InstanceID             string   `json:"instance_id"`
	Repo                   string   `json:"repo"`
	BaseCommit             string   `json:"base_commit"`
	ProblemStatement       string   `json:"problem_statement"`
	HintsText              string   `json:"hints_text"`
	Patch                  string   `json:"patch"`
	TestPatch              string   `json:"test_patch"`
	FailToPass             []string `json:"FAIL_TO_PASS"`
	PassToPass             []string `json:"PASS_TO_PASS"`
	Version                string   `json:"version"`
	EnvironmentSetupCommit string   `json:"environment_setup_commit"`
	TestCommand            string   `json:"test_command"`
	Framework              string   `json:"framework"`
}

// InstanceID is the SWE-bench id of demo task t: its upstream repository
// as owner__name, then the task id.
func InstanceID(t task.Task) string {
	return strings.ReplaceAll(strings.TrimPrefix(t.UpstreamRepo, "github.com/"), "/", "__") + "-" + t.ID
}

// SWEBenchImage is the image of demo task t's instance, named by
// task.DefaultImageTemplate as SWE-bench names its images.
func SWEBenchImage(t task.Task) string {
	return task.ImageName(task.DefaultImageTemplate, InstanceID(t))
}

// SWEBenchDockerfile builds the instance image of demo task t from its
// demo image (never pulled): the repository moved to /testbed, as in
// SWE-bench's images.
func SWEBenchDockerfile(t task.Task) string {
	return "FROM " + t.Image + "\nUSER root\nRUN mv " + t.Workdir + " " + task.InstanceWorkdir +
		"\nWORKDIR " + task.InstanceWorkdir + "\nLABEL rollcage.image=swebench-demo\n"
}

// CreationPatch is a git patch that creates the file name with content.
func CreationPatch(name, content string) string {
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	var b strings.Builder
	fmt.Fprintf(&b, "diff --git a/%s b/%s\nnew file mode 100644\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n", name, name, name, len(lines))
	for _, l := range lines {
		b.WriteString("+" + l + "\n")
	}
	return b.String()
}

// DeriveInstance writes demo task t as a SWE-bench instance, running it in
// a sandbox of its instance image (SWEBenchImage, which must exist): the
// reference fix is the diff from the base commit to the upstream fix,
// FAIL_TO_PASS the ids of the test patch that fail on the base commit and
// pass with the fix, PASS_TO_PASS those that pass on both.
func DeriveInstance(ctx context.Context, b sandbox.Backend, t task.Task, hidden fs.FS) (Instance, error) {
	fail := func(format string, args ...any) (Instance, error) {
		return Instance{}, fmt.Errorf("demo %s in SWE-bench form: "+format, append([]any{t.ID}, args...)...)
	}
	src, err := fs.ReadFile(hidden, path.Join(t.HiddenTests, "test_hidden.py"))
	if err != nil {
		return fail("%v", err)
	}
	in := Instance{
		InstanceID: InstanceID(t), Repo: strings.TrimPrefix(t.UpstreamRepo, "github.com/"), BaseCommit: t.BaseCommit,
		ProblemStatement: strings.ReplaceAll(t.Instruction, t.Workdir, task.InstanceWorkdir),
		TestPatch:        CreationPatch(SWEBenchTestFile, string(src)),
		TestCommand:      SWEBenchTestCommand, Framework: task.FrameworkPytest,
		Version: "0.0", EnvironmentSetupCommit: t.BaseCommit,
	}
	sb, err := b.Create(ctx, sandbox.Spec{Image: SWEBenchImage(t), EpisodeID: "swebench-demo-" + t.ID, Workdir: task.InstanceWorkdir, Network: sandbox.NetworkNone})
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = sb.Close(cctx)
	}()
	sh := func(cmd string) (string, error) {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: 5 * time.Minute, MaxOutput: 4 << 20})
		if err != nil {
			return "", err
		}
		if res.ExitCode != 0 && !strings.Contains(cmd, "pytest") {
			return "", fmt.Errorf("%s: exit %d: %s", cmd, res.ExitCode, strings.TrimSpace(res.Output))
		}
		return res.Output, nil
	}
	if in.Patch, err = sh("git diff " + t.BaseCommit + " " + t.UpstreamFixRef); err != nil {
		return fail("%v", err)
	}
	if strings.TrimSpace(in.Patch) == "" {
		return fail("the upstream fix %s changes nothing", t.UpstreamFixRef)
	}
	inst := task.Task{ID: t.ID, Workdir: task.InstanceWorkdir, BaseCommit: t.BaseCommit, TestPatch: in.TestPatch}
	script, err := inst.ApplyTestPatchScript("/tmp/rollcage-test.patch")
	if err != nil {
		return fail("%v", err)
	}
	if err := sb.WriteFile(ctx, "/tmp/rollcage-test.patch", []byte(in.TestPatch), 0o644); err != nil {
		return fail("%v", err)
	}
	if err := sb.WriteFile(ctx, "/tmp/rollcage-fix.patch", []byte(in.Patch), 0o644); err != nil {
		return fail("%v", err)
	}
	run := func(what string) (map[string]task.Status, error) {
		out, err := sh(SWEBenchTestCommand)
		if err != nil {
			return nil, err
		}
		st, err := task.ParseTestLog(task.FrameworkPytest, []byte(out))
		if err == nil && len(st) == 0 {
			err = fmt.Errorf("no test reported on the %s:\n%s", what, out)
		}
		return st, err
	}
	if _, err := sh(script); err != nil {
		return fail("%v", err)
	}
	base, err := run("base commit")
	if err != nil {
		return fail("%v", err)
	}
	if _, err := sh("git apply /tmp/rollcage-fix.patch"); err != nil {
		return fail("%v", err)
	}
	fixed, err := run("fix")
	if err != nil {
		return fail("%v", err)
	}
	for id, st := range fixed {
		switch {
		case st != task.StatusPassed: // neither list, as in SWE-bench
		case base[id] == task.StatusPassed:
			in.PassToPass = append(in.PassToPass, id)
		default:
			in.FailToPass = append(in.FailToPass, id)
		}
	}
	slices.Sort(in.FailToPass)
	slices.Sort(in.PassToPass)
	if len(in.FailToPass) == 0 {
		return fail("no test fails on the base commit and passes with the fix (base %v, fix %v)", base, fixed)
	}
	return in, nil
}
