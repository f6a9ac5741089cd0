package demo

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"path"
	"slices"
	"testing"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/task"
)

// TestSWEBenchFormInDocker plays demo tasks in SWE-bench's form through
// the pieces grading by test id is made of: the hidden tests as a test
// patch, put in place by ApplyTestPatchScript after the solution (which
// resets what the solution did to the patch's files), pytest -rA read by
// ParseTestLog, FAIL_TO_PASS and PASS_TO_PASS derived by running the
// no-op and the clean solve, and SWEBenchReport. The clean solve resolves;
// the no-op does not, nor does a hack that writes passing tests where the
// test patch puts the real ones.
func TestSWEBenchFormInDocker(t *testing.T) {
	b := dockertest.Backend(t)
	tasks, hidden, scripts := loadAll(t)
	for _, tk := range tasks {
		if tk.ID != "textwrap" && tk.ID != "roman" {
			continue // two tasks show the composition; the suite test plays all
		}
		t.Run(tk.ID, func(t *testing.T) {
			t.Parallel()
			src, err := fs.ReadFile(hidden, path.Join(tk.HiddenTests, "test_hidden.py"))
			if err != nil {
				t.Fatal(err)
			}
			inst := task.Task{
				ID: tk.ID, InstanceID: "rollcage__demo-" + tk.ID, Workdir: tk.Workdir, BaseCommit: tk.BaseCommit,
				TestPatch:   CreationPatch(SWEBenchTestFile, string(src)),
				Framework:   task.FrameworkPytest,
				TestCommand: "python3 -s -m pytest -rA -p no:cacheprovider " + SWEBenchTestFile,
			}
			run := func(name string, kind string, before string) map[string]task.Status {
				sb := create(t, b, tk, "demo-swe-"+name+"-"+tk.ID)
				for _, s := range scriptsOf(scripts, tk.ID) {
					if s.Kind == kind {
						play(t, sb, tk, s)
					}
				}
				if before != "" {
					sh(t, sb, before)
				}
				var archive bytes.Buffer
				tw := tar.NewWriter(&archive)
				if err := tw.WriteHeader(&tar.Header{Name: "test.patch", Mode: 0o644, Size: int64(len(inst.TestPatch))}); err != nil {
					t.Fatal(err)
				}
				tw.Write([]byte(inst.TestPatch))
				tw.Close()
				if err := sb.CopyIn(t.Context(), "/tmp/rollcage-grade", &archive); err != nil {
					t.Fatal(err)
				}
				script, err := inst.ApplyTestPatchScript("/tmp/rollcage-grade/test.patch")
				if err != nil {
					t.Fatal(err)
				}
				sh(t, sb, script)
				res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "cd " + tk.Workdir + " && " + inst.TestCommand})
				if err != nil {
					t.Fatal(err)
				}
				st, err := task.ParseTestLog(inst.Framework, []byte(res.Output))
				if err != nil || len(st) == 0 {
					t.Fatalf("%s: ParseTestLog = %v, %v\n%s", name, st, err, res.Output)
				}
				return st
			}
			noop := run("noop", task.KindNoop, "")
			clean := run("clean", task.KindClean, "")
			var f2p, p2p []string
			for id, st := range clean {
				switch {
				case st != task.StatusPassed:
					t.Errorf("clean solve: %s is %s", id, st)
				case noop[id] == task.StatusPassed:
					p2p = append(p2p, id)
				default:
					f2p = append(f2p, id)
				}
			}
			slices.Sort(f2p)
			slices.Sort(p2p)
			if len(f2p) == 0 {
				t.Fatalf("no FAIL_TO_PASS ids: no-op %v, clean %v", noop, clean)
			}
			// A hack: passing tests written where the test patch puts the
			// hidden ones, on top of the no-op. The reset removes them.
			hack := run("hack", task.KindNoop, "mkdir -p tests && printf 'def test_ok():\\n    pass\\n' > "+SWEBenchTestFile)
			for name, st := range map[string]map[string]task.Status{"clean": clean, "noop": noop, "hack": hack} {
				rep := task.SWEBenchReport(inst.InstanceID, f2p, p2p, task.ReportRun{Ran: true, Statuses: st})[inst.InstanceID]
				if rep.Resolved != (name == "clean") {
					t.Errorf("%s: resolved %v (FAIL_TO_PASS %+v, PASS_TO_PASS %+v)", name, rep.Resolved, rep.TestsStatus.FailToPass, rep.TestsStatus.PassToPass)
				}
			}
			// The same three graded as the harness grades an instance: the
			// test patch applied after the change, the kit watching.
			inst.FailToPass, inst.PassToPass = f2p, p2p
			for _, g := range []struct {
				name, kind, before string
				reward             float64
			}{
				{"clean", task.KindClean, "", 1},
				{"noop", task.KindNoop, "", 0},
				{"hack", task.KindNoop, "mkdir -p tests && printf 'def test_ok():\\n    pass\\n' > " + SWEBenchTestFile, 0},
			} {
				sb := create(t, b, tk, "demo-swe-watched-"+g.name+"-"+tk.ID)
				for _, s := range scriptsOf(scripts, tk.ID) {
					if s.Kind == g.kind {
						play(t, sb, tk, s)
					}
				}
				if g.before != "" {
					sh(t, sb, g.before)
				}
				surf, err := task.QuerySurface(t.Context(), sb, inst)
				if err != nil {
					t.Fatal(err)
				}
				facts := task.Facts{FailToPass: f2p, PassToPass: p2p, Declared: true}
				res, err := task.GradeWatched(t.Context(), sb, inst, nil, task.Watch{Facts: facts, Surface: surf})
				if err != nil {
					t.Fatalf("watched %s: %v", g.name, err)
				}
				if len(res.Probes) != 2 || !res.Probes[0].OK || !res.Probes[1].OK {
					t.Errorf("watched %s: probes %+v, want the literal pair, both behaving", g.name, res.Probes)
				}
				if res.Reward != g.reward || res.Integrity != task.IntegrityWatched || len(res.Findings) > 0 {
					t.Errorf("watched %s: reward %v integrity %s findings %+v, want %v, watched, none (statuses %v)",
						g.name, res.Reward, res.Integrity, res.Findings, g.reward, res.Statuses)
				}
			}
			if _, ok := hack["tests/test_swebench_hidden.py::test_ok"]; ok {
				t.Error("hack: its own test ran; the test patch's file was not reset")
			}
			t.Logf("%s: %d FAIL_TO_PASS, %d PASS_TO_PASS", tk.ID, len(f2p), len(p2p))
		})
	}
}
