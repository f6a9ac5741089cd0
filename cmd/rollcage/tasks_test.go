package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

func TestTasksCheck(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "instances.jsonl")
	lines := `{"instance_id":"x__y-1","repo":"x/y","base_commit":"0123456","problem_statement":"p","test_patch":"diff --git a/t.py b/t.py\n","FAIL_TO_PASS":["t.py::test_a"]}` + "\n" +
		`{"instance_id":"x__y-2","repo":"x/y","base_commit":"0123456","problem_statement":"p","test_patch":"diff --git a/t.py b/t.py\n","FAIL_TO_PASS":3}` + "\n"
	if err := os.WriteFile(bad, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	// A task whose hidden tests have one test the cases cannot perturb.
	withCases := filepath.Join(dir, "cases")
	if err := os.MkdirAll(filepath.Join(withCases, "hidden"), 0o755); err != nil {
		t.Fatal(err)
	}
	taskLine := `{"id": "c1", "image": "local/c1", "instruction": "fix it", "hidden_tests": "hidden", "test_command": "python3 -m pytest -q /opt/grader/tests", "upstream_fix_ref": "fix"}` + "\n"
	hiddenSrc := "def test_plain():\n    assert f(1) == 1\n\n\ndef test_tmp(tmp_path):\n    assert f(tmp_path)\n"
	if err := os.WriteFile(filepath.Join(withCases, "tasks.jsonl"), []byte(taskLine), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withCases, "hidden", "test_x.py"), []byte(hiddenSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args     []string
		code     int
		out, err []string // lines stdout / stderr must hold
		notInOut string
	}{
		{[]string{"tasks", "check", "../../task/testdata/instances"}, 0, []string{
			"../../task/testdata/instances/swebench.jsonl: django__django-11099",
			"  image        swebench/sweb.eval.x86_64.django_1776_django-11099:latest (never pulled; sealed at d26b2424437d: nothing beyond it in the history)",
			"  reward       1 when every one of 2 expected test ids (1 FAIL_TO_PASS, 1 PASS_TO_PASS) is reported passed in django's output",
			"  protected    bug patch (1 removed line, which a fix restores)",
			"4 tasks ready, 0 problems",
		}, nil, "See ticket"},
		{[]string{"tasks", "check", "--hints", "--image-template", "local/{id}", "../../task/testdata/instances/swebench.jsonl"}, 0, []string{
			"  image        local/django_1776_django-11099 (never pulled; sealed at d26b2424437d: nothing beyond it in the history)",
			"2 tasks ready, 0 problems",
		}, nil, "hints not shown"},
		{[]string{"tasks", "check", "../../demo/tasks.jsonl"}, 0, []string{"../../demo/tasks.jsonl: textwrap", "8 tasks ready, 0 problems"}, nil, ""},
		{[]string{"tasks", "check", filepath.Join(withCases, "tasks.jsonl")}, 0, []string{
			"  cases        test_x.py::test_tmp: no cases (takes fixtures tmp_path)",
			"1 tasks ready, 0 problems",
		}, nil, "test_plain"},
		{[]string{"tasks", "check", bad}, 1, []string{
			bad + `:1: no test command is known for repository "x/y"; add test_command and framework to the instance`,
			bad + ":2: FAIL_TO_PASS is not a list of test ids",
			"0 tasks ready, 2 problems",
		}, nil, ""},
		{[]string{"tasks", "check", "--image-template", "{nope}", bad}, 1, []string{bad + `: image template "{nope}": unknown placeholder {nope}; use {id}, {id_s} or {instance_id}`}, nil, ""},
		{[]string{"tasks", "check", "../../task/testdata/harbor"}, 1, []string{
			"../../task/testdata/harbor: csv-sum",
			"  reward       what the test command writes to /logs/verifier/reward.txt (or reward.json beside it), a number in [0, 1]",
			"  protected    hidden tests outside the sandbox until grading; reference solution csv-sum/solution (never in the sandbox)",
			"../../task/testdata/harbor/needs-net/tests/test.sh:2: installs tools over the network (apt-get update), which the verifier has not: install them in environment/Dockerfile and drop the line",
			"1 tasks ready, 4 problems",
		}, nil, ""},
		{[]string{"tasks", "check", "../../task/testdata/family/multiswebench.jsonl"}, 1, []string{
			"../../task/testdata/family/multiswebench.jsonl:2: image mswebench/cli_m_cli:pr-513, as Multi-SWE-bench's harness builds it, holds the fix and the test patch (/home/fix.patch, /home/test.patch), where the agent could read them: build one without them and name it with --image-template",
			"0 tasks ready, 2 problems",
		}, nil, ""},
		{[]string{"tasks", "check", "--image-template", "local/msb.{id}:clean", "../../task/testdata/family/multiswebench.jsonl"}, 0, []string{
			"../../task/testdata/family/multiswebench.jsonl: cli__cli-513",
			"  benchmark    multi-swe-bench instance cli__cli-513",
			"  instruction  \"pr view does not say a PR is a draft\" (85 chars); hints not shown (--hints adds them)",
			"  reward       1 when every one of 4 expected test ids (2 FAIL_TO_PASS, 2 PASS_TO_PASS) is reported passed in go's output",
			"2 tasks ready, 0 problems",
		}, nil, ""},
		{[]string{"tasks", "check", "../../task/testdata/family/r2egym.jsonl"}, 0, []string{
			"../../task/testdata/family/r2egym.jsonl: aiohttp__9c1d2e3f4a5b9c1d2e3f4a5b9c1d2e3f4a5b9c1d",
			"  benchmark    r2e-gym instance aiohttp__9c1d2e3f4a5b9c1d2e3f4a5b9c1d2e3f4a5b9c1d",
			"  image        namanjain12/aiohttp_final:9c1d2e3f4a5b9c1d2e3f4a5b9c1d2e3f4a5b9c1d (never pulled; sealed at 4b7e3a1c9d2f: nothing beyond it in the history)",
			"  grading      in a fresh sandbox from the image, where no process of the policy runs: the submitted diff applied, then the image's own hidden tests (/r2e_tests /testbed/run_tests.sh), deleted from the sealed image the episode runs, then the test command",
			"  reward       1 when the run reports exactly the 4 expected tests, each with its expected status (2 PASSED, 1 FAILED, 1 ERROR), as R2E-Gym rewards",
			"  command      bash run_tests.sh (after 1 setup lines: rm -rf r2e_tests && ln -s /r2e_tests r2e_tests)",
			"  protected    reference fix (2 added lines, never in the sandbox); image's hidden tests deleted from the episode's image: /r2e_tests /testbed/run_tests.sh; protected paths /r2e_tests /r2e_tests/** **/r2e_tests/**",
			"1 tasks ready, 0 problems",
		}, nil, ""},
		{[]string{"tasks", "check", "../../task/testdata/harbor/csv-sum"}, 0, []string{"../../task/testdata/harbor/csv-sum: rollcage__csv-sum", "1 tasks ready, 0 problems"}, nil, ""},
		{[]string{"tasks"}, 2, nil, []string{"usage: rollcage tasks check"}, ""},
		{[]string{"tasks", "check"}, 2, nil, []string{"usage: rollcage tasks check"}, ""},
		{[]string{"tasks", "check", filepath.Join(dir, "missing.jsonl")}, 2, nil, []string{"no such file or directory"}, ""},
		{[]string{"tasks", "check", t.TempDir()}, 2, nil, []string{"holds no task file (*.jsonl, *.json)"}, ""},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errb)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errb.String())
			}
			for _, line := range tc.out {
				if !strings.Contains("\n"+out.String(), "\n"+line+"\n") {
					t.Errorf("stdout lacks the line %q:\n%s", line, out.String())
				}
			}
			for _, s := range tc.err {
				if !strings.Contains(errb.String(), s) || strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 {
					t.Errorf("stderr is not one line holding %q:\n%s", s, errb.String())
				}
			}
			if tc.notInOut != "" && strings.Contains(out.String(), tc.notInOut) {
				t.Errorf("output holds %q:\n%s", tc.notInOut, out.String())
			}
		})
	}
}

// TestTasksCheckImages asks the local Docker engine, which has none of the
// benchmark images the test instances name.
func TestTasksCheckImages(t *testing.T) {
	sandboxtest.SkipShort(t, "the Docker engine")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"tasks", "check", "--images", "../../task/testdata/instances/swebench.jsonl"}, &out, &errb)
	for _, line := range []string{
		"../../task/testdata/instances/swebench.jsonl: django__django-11099: image swebench/sweb.eval.x86_64.django_1776_django-11099:latest is not present locally; rollcage never pulls: pull or build it first",
		"2 tasks ready, 2 problems",
	} {
		if !strings.Contains("\n"+out.String(), "\n"+line+"\n") {
			t.Errorf("stdout lacks the line %q:\n%s", line, out.String())
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1\nstderr: %s", code, errb.String())
	}
}
