package task

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestLoadInstances(t *testing.T) {
	swe, _, err := LoadFileWith("testdata/instances/swebench.jsonl", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	family, _, err := LoadFileWith("testdata/instances/gym_smith.json", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := append(swe, family...)
	want := []Task{{
		ID: "django__django-11099", InstanceID: "django__django-11099", Benchmark: BenchmarkSWEBench,
		Image:       "swebench/sweb.eval.x86_64.django_1776_django-11099:latest",
		Instruction: "UsernameValidator allows trailing newline in usernames\n",
		Workdir:     "/testbed", HiddenTestsDest: DefaultHiddenTestsDest,
		BaseCommit: "d26b2424437dabeeca94d7900b37d2df4410da0c", UpstreamRepo: "github.com/django/django",
		Version: "3.0", EnvironmentSetupCommit: "419a78300f7cd27611196e1e464d50fd0385ff27",
		FailToPass: []string{"test_history_view_custom_qs (admin_views.tests.AdminViewBasicTest)"},
		PassToPass: []string{"test_add_view (admin_views.tests.AdminViewBasicTest)"},
		Framework:  FrameworkDjango, Hints: "See ticket #30302.",
		TestCommand: "source /opt/miniconda3/bin/activate\nconda activate testbed\n" +
			"sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen\nexport LANG=en_US.UTF-8\nexport LANGUAGE=en_US:en\nexport LC_ALL=en_US.UTF-8\n" +
			"python -m pip install -e .\n" +
			"./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 admin_views.tests admin_views.test_history",
	}, {
		ID: "sympy__sympy-20590", InstanceID: "sympy__sympy-20590", Benchmark: BenchmarkSWEBench,
		Image:       "swebench/sweb.eval.x86_64.sympy_1776_sympy-20590:latest",
		Instruction: "Symbol instances have __dict__ since 1.7?",
		Workdir:     "/testbed", HiddenTestsDest: DefaultHiddenTestsDest,
		BaseCommit: "cffd4e0f86fefd4802349a9f9b19ed70934ea354", UpstreamRepo: "github.com/sympy/sympy",
		Version: "1.7", EnvironmentSetupCommit: "cffd4e0f86fefd4802349a9f9b19ed70934ea354",
		FailToPass: []string{"test_latex_basic"}, PassToPass: []string{},
		Framework: FrameworkSympy,
		TestCommand: "source /opt/miniconda3/bin/activate\nconda activate testbed\npython -m pip install -e .\n" +
			"PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose sympy/printing/tests/test_latex.py",
	}, {
		ID: "getmoto__moto-5406", InstanceID: "getmoto__moto-5406", Benchmark: BenchmarkSWEGym,
		Image:       "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5406:latest",
		Instruction: "DynamoDB put_item accepts an empty key",
		Workdir:     "/testbed", HiddenTestsDest: DefaultHiddenTestsDest,
		BaseCommit: "87683a786f0d3a0280c92ea01fecce8a3bd5cde2", UpstreamRepo: "github.com/getmoto/moto",
		Version: "4.0", EnvironmentSetupCommit: "87683a786f0d3a0280c92ea01fecce8a3bd5cde2",
		FailToPass: []string{"tests/test_dynamodb/test_dynamodb.py::test_put_item_with_empty_key"},
		PassToPass: []string{"tests/test_dynamodb/test_dynamodb.py::test_list_tables[no args]"},
		Framework:  FrameworkPytest,
		TestCommand: "source /opt/miniconda3/bin/activate\nconda activate testbed\nmake init\n" +
			"pytest -n0 -rA tests/test_dynamodb/test_dynamodb.py",
	}, {
		ID: "pandas-dev__pandas.95280573.pr_53652", InstanceID: "pandas-dev__pandas.95280573.pr_53652", Benchmark: BenchmarkSWESmith,
		Image:       "jyangballin/swesmith.x86_64.pandas-dev_1776_pandas.95280573",
		Instruction: "DataFrame.copy returns the wrong type",
		Workdir:     "/testbed", HiddenTestsDest: DefaultHiddenTestsDest,
		BaseCommit: "5d2b3c1f0a9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c", UpstreamRepo: "github.com/swesmith/pandas-dev__pandas.95280573",
		FailToPass: []string{"pandas/tests/frame/test_api.py::test_a", "pandas/tests/frame/test_api.py::test_b[x-1]", "pandas/tests/io/test_csv.py::test_c"},
		PassToPass: []string{"pandas/tests/frame/test_api.py::test_d"},
		Framework:  FrameworkPytest,
		TestCommand: "source /opt/miniconda3/bin/activate\nconda activate testbed\n" +
			"pytest --disable-warnings --color=no --tb=no --verbose pandas/tests/frame/test_api.py pandas/tests/io/test_csv.py",
	}}
	// The patches are checked apart: long, and only where they went matters.
	ignore := cmpopts.IgnoreFields(Task{}, "TestPatch", "FixPatch", "BugPatch")
	if diff := cmp.Diff(want, got, ignore); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	for _, tk := range got {
		if err := tk.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", tk.ID, err)
		}
	}
	// SWE-bench's and SWE-Gym's patch is the fix; SWE-smith's made the bug.
	for i, wantFix := range []bool{true, true, true, false} {
		tk := got[i]
		if (tk.FixPatch != "") != wantFix || (tk.BugPatch != "") == wantFix {
			t.Errorf("%s: fix patch %d bytes, bug patch %d bytes; want the patch as the %s", tk.ID, len(tk.FixPatch), len(tk.BugPatch), map[bool]string{true: "fix", false: "bug"}[wantFix])
		}
		if wantFix && !strings.HasPrefix(tk.TestPatch, "diff --git a/") {
			t.Errorf("%s: test patch %q", tk.ID, tk.TestPatch)
		}
	}
	if strings.Contains(got[0].Instruction, "ticket") {
		t.Errorf("hints shown without LoadOptions.Hints: %q", got[0].Instruction)
	}
}

func TestLoadInstanceOptions(t *testing.T) {
	tasks, _, err := LoadFileWith("testdata/instances/swebench.jsonl", LoadOptions{Hints: true, ImageTemplate: "local/{instance_id}-{id_s}:dev"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tasks[0].Image, "local/django__django-11099-django_s_django-11099:dev"; got != want {
		t.Errorf("image %q, want %q", got, want)
	}
	if got, want := tasks[0].Instruction, "UsernameValidator allows trailing newline in usernames\n\n\nHints:\nSee ticket #30302."; got != want {
		t.Errorf("instruction %q, want %q", got, want)
	}
	if got := tasks[1].Instruction; strings.Contains(got, "Hints:") {
		t.Errorf("empty hints_text still added: %q", got)
	}
	_, _, err = LoadFileWith("testdata/instances/swebench.jsonl", LoadOptions{ImageTemplate: "x/{name}"})
	if want := `testdata/instances/swebench.jsonl: image template "x/{name}": unknown placeholder {name}; use {id}, {id_s} or {instance_id}`; err == nil || err.Error() != want {
		t.Errorf("bad template: error %v, want %q", err, want)
	}
}

// TestLoadMultiSWE: Multi-SWE-bench instances load as their harness
// grades them, on images named by the template.
func TestLoadMultiSWE(t *testing.T) {
	got, _, err := LoadFileWith("testdata/family/multiswebench.jsonl", LoadOptions{ImageTemplate: "local/msb.{id}:clean"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Task{{
		ID: "cli__cli-513", InstanceID: "cli__cli-513", Benchmark: BenchmarkMultiSWE, Language: "go",
		Image:       "local/msb.cli_1776_cli-513:clean",
		Instruction: "pr view does not say a PR is a draft\n\nRunning gh pr view on a draft PR prints `open`.",
		Hints:       "isDraft is a new field of the PullRequest struct.",
		Workdir:     "/home/cli", HiddenTestsDest: DefaultHiddenTestsDest,
		BaseCommit: "c4c8a5b4e0a9e3f4a4d6f0a8b2c1d3e5f7a9b0c1", UpstreamRepo: "github.com/cli/cli",
		FailToPass:  []string{"TestPRView_draft", "TestPRView_web"},
		PassToPass:  []string{"TestPRView_closed/merged", "TestPRView_open"},
		TestCommand: "go test -v -count=1 ./...", Framework: FrameworkGo,
	}, {
		ID: "yargs__yargs-parser-42", InstanceID: "yargs__yargs-parser-42", Benchmark: BenchmarkMultiSWE, Language: "typescript",
		Image:       "local/msb.yargs_1776_yargs-parser-42:clean",
		Instruction: "--no-a is not read as a: false",
		Workdir:     "/home/yargs-parser", HiddenTestsDest: DefaultHiddenTestsDest,
		BaseCommit: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c", UpstreamRepo: "github.com/yargs/yargs-parser",
		FailToPass:  []string{"parses a negated flag"},
		PassToPass:  []string{"parses a flag"},
		TestCommand: "npx jest --ci --verbose=false --json", Framework: FrameworkJest,
	}}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Task{}, "TestPatch", "FixPatch")); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	for _, tk := range got {
		if !strings.HasPrefix(tk.TestPatch, "diff --git a/") || !strings.HasPrefix(tk.FixPatch, "diff --git a/") {
			t.Errorf("%s: test patch %q, fix patch %q; want both", tk.ID, tk.TestPatch, tk.FixPatch)
		}
	}
	hinted, _, err := LoadFileWith("testdata/family/multiswebench.jsonl", LoadOptions{ImageTemplate: "x/{id}", Hints: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(hinted[0].Instruction, "\n\nHints:\nisDraft is a new field of the PullRequest struct.") {
		t.Errorf("with hints: instruction %q", hinted[0].Instruction)
	}
}

// instanceLine is a valid SWE-bench instance line with fields replaced.
func instanceLine(repl ...string) string {
	s := `{"repo":"psf/requests","instance_id":"psf__requests-2317","base_commit":"091991be0da19de9108dbe5e3752917fea3d7fdc",` +
		`"patch":"diff --git a/requests/sessions.py b/requests/sessions.py\n","test_patch":"diff --git a/test_requests.py b/test_requests.py\n",` +
		`"problem_statement":"method = builtin_str(method) problem","version":"2.4",` +
		`"FAIL_TO_PASS":["test_requests.py::RequestsTestCase::test_HTTP_200_OK_GET_ALTERNATIVE"],"PASS_TO_PASS":[]}`
	return strings.NewReplacer(repl...).Replace(s)
}

// msbLine is a Multi-SWE-bench instance line with fields replaced.
func msbLine(repl ...string) string {
	s := `{"org":"cli","repo":"cli","number":513,"base":{"sha":"c4c8a5b4e0a9e3f4a4d6f0a8b2c1d3e5f7a9b0c1"},` +
		`"resolved_issues":[{"number":512,"title":"t","body":"b"}],"fix_patch":"diff --git a/a.go b/a.go\n","test_patch":"diff --git a/a_test.go b/a_test.go\n",` +
		`"f2p_tests":{"TestA":{}},"p2p_tests":{},"lang":"go","test_command":"go test -v ./...","framework":"go"}`
	return strings.NewReplacer(repl...).Replace(s)
}

// r2eLine is the R2E-Gym instance of testdata/family/r2egym.jsonl with
// strings replaced.
func r2eLine(repl ...string) string {
	b, err := os.ReadFile("testdata/family/r2egym.jsonl")
	if err != nil {
		panic(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.NewReplacer(repl...).Replace(lines[len(lines)-1])
}

// TestLoadR2EGym: an R2E-Gym instance loads as its runtime grades it,
// its hidden tests deleted from the episode's image.
func TestLoadR2EGym(t *testing.T) {
	got, _, err := LoadFileWith("testdata/family/r2egym.jsonl", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const id = "aiohttp__9c1d2e3f4a5b9c1d2e3f4a5b9c1d2e3f4a5b9c1d"
	want := []Task{{
		ID: id, InstanceID: id, Benchmark: BenchmarkR2EGym,
		Image:       "namanjain12/aiohttp_final:9c1d2e3f4a5b9c1d2e3f4a5b9c1d2e3f4a5b9c1d",
		Instruction: "HEAD responses report Content-Length 0\n\nA HEAD request to a handler that returns a body gets `Content-Length: 0`.",
		Workdir:     "/testbed", HiddenTestsDest: DefaultHiddenTestsDest,
		BaseCommit:     "4b7e3a1c9d2f4b7e3a1c9d2f4b7e3a1c9d2f4b7e",
		ImageHidden:    []string{"/r2e_tests", "/testbed/run_tests.sh"},
		ProtectedPaths: []string{"/r2e_tests", "/r2e_tests/**", "**/r2e_tests/**"},
		ExpectedStatus: map[string]string{"test_head_content_length": "PASSED", "TestResponse.test_get": "PASSED",
			"test_legacy_head": "FAILED", "test_broken_fixture": "ERROR"},
		FailToPass: []string{"TestResponse.test_get", "test_head_content_length"},
		FixPatch: "diff --git a/aiohttp/web_response.py b/aiohttp/web_response.py\n--- a/aiohttp/web_response.py\n+++ b/aiohttp/web_response.py\n" +
			"@@ -310,3 +310,4 @@ def _start(self, request):\n         if self._length_check:\n-            self.content_length = 0\n" +
			"+            if request.method != hdrs.METH_HEAD:\n+                self.content_length = 0\n         return writer\n",
		TestCommand: "rm -rf r2e_tests && ln -s /r2e_tests r2e_tests\nbash run_tests.sh", Framework: FrameworkPytest,
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	if added := AddedLines(got[0].FixPatch); len(added) != 2 {
		t.Errorf("fix patch's added lines %q; want the two of the non-test file", added)
	}
	named, _, err := LoadFileWith("testdata/family/r2egym.jsonl", LoadOptions{ImageTemplate: "local/r2e.{instance_id}:clean"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "local/r2e." + id + ":clean"; named[0].Image != want {
		t.Errorf("with a template: image %q, want %q", named[0].Image, want)
	}
}

func TestLoadInstanceErrors(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"F2P a number", instanceLine(`"FAIL_TO_PASS":[`, `"FAIL_TO_PASS":7,"x":[`),
			`instances.jsonl:1: FAIL_TO_PASS is not a list of test ids`},
		{"P2P a string not a list", instanceLine(`"PASS_TO_PASS":[]`, `"PASS_TO_PASS":"test_a"`),
			`instances.jsonl:1: PASS_TO_PASS is not a list of test ids (a string, but not a JSON list of strings)`},
		{"F2P empty", instanceLine(`["test_requests.py::RequestsTestCase::test_HTTP_200_OK_GET_ALTERNATIVE"]`, `[]`),
			`instances.jsonl:1: FAIL_TO_PASS is empty, so nothing would show the instance solved; give the ids of the tests the fix makes pass`},
		{"empty id", instanceLine(`"PASS_TO_PASS":[]`, `"PASS_TO_PASS":["a"," "]`),
			`instances.jsonl:1: field "pass_to_pass" has an empty test id (entry 2)`},
		{"no problem statement", instanceLine(`method = builtin_str(method) problem`, ``),
			`instances.jsonl:1: problem_statement is required`},
		{"no test patch", instanceLine(`"test_patch":"diff --git a/test_requests.py b/test_requests.py\n"`, `"test_patch":""`),
			`instances.jsonl:1: test_patch is empty; a SWE-bench instance's hidden tests come as its test patch`},
		{"test patch of data files", instanceLine(`b/test_requests.py\n`, `b/data.json\n`),
			`instances.jsonl:1: test_patch touches no test file, so there is nothing to run`},
		{"unknown repo", instanceLine(`"repo":"psf/requests"`, `"repo":"acme/widgets"`),
			`instances.jsonl:1: no test command is known for repository "acme/widgets"; add test_command and framework to the instance`},
		{"unknown version", instanceLine(`"version":"2.4"`, `"version":"9.9"`),
			`instances.jsonl:1: version "9.9" of psf/requests is not in the benchmark's specs; add test_command and framework to the instance`},
		{"own command without framework", instanceLine(`"repo":"psf/requests"`, `"repo":"acme/widgets","test_command":"make test"`),
			`instances.jsonl:1: test_command is given without framework; say which runner's output it prints: pytest, django, sympy, go, jest`},
		{"unknown framework", instanceLine(`"repo":"psf/requests"`, `"repo":"acme/widgets","test_command":"make test","framework":"nose"`),
			`instances.jsonl:1: field "framework" is "nose"; use one of pytest, django, sympy, go, jest`},
		{"wrong type", instanceLine(`"repo":"psf/requests"`, `"repo":5`),
			`instances.jsonl:1: field "repo" must be string, not number`},
		{"bad base commit", instanceLine(`091991be0da19de9108dbe5e3752917fea3d7fdc`, `HEAD`),
			`instances.jsonl:1: field "base_commit" is "HEAD"; give a full lowercase commit id`},
		{"duplicate", instanceLine() + "\n" + instanceLine(),
			`instances.jsonl:2: duplicate id "psf__requests-2317" (first on line 1)`},
		{"Multi-SWE-bench without a test command", msbLine(`,"test_command":"go test -v ./...","framework":"go"`, ``),
			`instances.jsonl:1: a Multi-SWE-bench instance runs its tests by commands its harness keeps per repository; add test_command (the repository's run.sh, run in /home/cli after rollcage applies the test patch) and framework (pytest, django, sympy, go, jest)`},
		{"Multi-SWE-bench on its own image", msbLine(),
			`instances.jsonl:1: image mswebench/cli_m_cli:pr-513, as Multi-SWE-bench's harness builds it, holds the fix and the test patch (/home/fix.patch, /home/test.patch), where the agent could read them: build one without them and name it with --image-template`},
		{"Multi-SWE-bench without fixed tests", msbLine(`"f2p_tests":{"TestA":{}}`, `"f2p_tests":{}`),
			`instances.jsonl:1: f2p_tests, s2p_tests and n2p_tests are empty, so nothing would show the instance solved; give the tests the fix makes pass`},
		{"Multi-SWE-bench without an issue", msbLine(`{"number":512,"title":"t","body":"b"}`, ``),
			`instances.jsonl:1: resolved_issues is empty, so nothing states the problem; give the issue the pull request resolves`},
		{"Multi-SWE-bench without a base", msbLine(`"base":{"sha":"c4c8a5b4e0a9e3f4a4d6f0a8b2c1d3e5f7a9b0c1"},`, ``),
			`instances.jsonl:1: a Multi-SWE-bench instance without base.sha; give org, repo, number and base.sha`},
		{"Multi-SWE-bench with an unknown framework", msbLine(`"framework":"go"`, `"framework":"cargo"`),
			`instances.jsonl:1: field "framework" is "cargo"; use one of pytest, django, sympy, go, jest`},
		{"R2E-Gym without a parsed commit", `{"repo_name":"aiohttp","docker_image":"namanjain12/aiohttp_final:abc","problem_statement":"p","expected_output_json":"{}"}`,
			`instances.jsonl:1: an R2E-Gym instance without parsed_commit_content; give repo_name, docker_image, parsed_commit_content, problem_statement and expected_output_json`},
		{"R2E-Gym without commits", r2eLine(`\"old_commit_hash\": \"4b7e3a1c9d2f4b7e3a1c9d2f4b7e3a1c9d2f4b7e\"`, `\"old_commit_hash\": \"\"`),
			`instances.jsonl:1: parsed_commit_content has no old_commit_hash and new_commit_hash commit ids; the episode starts from the old one`},
		{"R2E-Gym without expected tests", r2eLine(`"expected_output_json": "{`, `"expected_output_json": "{}", "x": "{`),
			`instances.jsonl:1: expected_output_json names no tests, so nothing would show the instance solved`},
		{"R2E-Gym with an unknown status", r2eLine(`\"test_broken_fixture\": \"ERROR\"`, `\"test_broken_fixture\": \"SKIPPED\"`),
			`instances.jsonl:1: field "expected_status" gives "test_broken_fixture" the status "SKIPPED"; use PASSED, FAILED or ERROR`},
		{"hidden image tests unsealed", `{"id":"x","image":"i","instruction":"i","test_command":"t","image_hidden":["/r2e_tests"],"seal":false}`,
			`instances.jsonl:1: field "seal" is false, but the image holds hidden tests (image_hidden) that only its sealed image is without; drop "seal": false`},
		{"hidden image tests relative", `{"id":"x","image":"i","instruction":"i","test_command":"t","image_hidden":["r2e_tests"]}`,
			`instances.jsonl:1: field "image_hidden" has "r2e_tests"; give absolute paths below / without quotes`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(fstest.MapFS{"instances.jsonl": {Data: []byte(tc.file)}}, "instances.jsonl")
			if err == nil || err.Error() != tc.want {
				t.Errorf("Load: error %v\nwant %q", err, tc.want)
			}
		})
	}
}

// TestCheckAllProblems: Check goes past a bad line and names each, with
// the line numbers of a multi-line .json array.
func TestCheckAllProblems(t *testing.T) {
	file := "[\n" + instanceLine() + ",\n" +
		instanceLine(`"instance_id":"psf__requests-2317"`, `"instance_id":"psf__requests-1"`, `"FAIL_TO_PASS":[`, `"FAIL_TO_PASS":{},"x":[`) + ",\n\n" +
		instanceLine(`"instance_id":"psf__requests-2317"`, `"instance_id":"psf__requests-2"`) + ",\n" +
		instanceLine(`"instance_id":"psf__requests-2317"`, `"instance_id":"psf__requests-3"`, `"version":"2.4"`, `"version":"0.1"`) + "\n]\n"
	tasks, problems := Check(fstest.MapFS{"instances.json": {Data: []byte(file)}}, "instances.json", LoadOptions{})
	var got []string
	for _, p := range problems {
		got = append(got, p.Error())
	}
	want := []string{
		`instances.json:3: FAIL_TO_PASS is not a list of test ids`,
		`instances.json:6: version "0.1" of psf/requests is not in the benchmark's specs; add test_command and framework to the instance`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if len(tasks) != 2 || tasks[0].ID != "psf__requests-2317" || tasks[1].ID != "psf__requests-2" {
		t.Errorf("tasks without problems: %v", tasks)
	}
}

func TestRollcageTaskByID(t *testing.T) {
	// A task of rollcage's own may name its framework; an unknown one is
	// refused, and none means pytest.
	line := `{"id":"t1","image":"i","instruction":"x","hidden_tests":"hidden/t1","test_command":"go test -json ./...","fail_to_pass":["TestA"],"framework":"go"}`
	fsys := fstest.MapFS{"tasks.jsonl": {Data: []byte(line)}, "hidden/t1/a_test.go": {Data: []byte("package a")}}
	tasks, err := Load(fsys, "tasks.jsonl")
	if err != nil || len(tasks) != 1 || tasks[0].TestFramework() != FrameworkGo {
		t.Fatalf("Load: %v, %v", tasks, err)
	}
	fsys["tasks.jsonl"] = &fstest.MapFile{Data: []byte(strings.Replace(line, `"framework":"go"`, `"framework":"mocha"`, 1))}
	_, err = Load(fsys, "tasks.jsonl")
	if want := `tasks.jsonl:1: field "framework" is "mocha"; use one of pytest, django, sympy, go, jest`; err == nil || err.Error() != want {
		t.Errorf("unknown framework: error %v, want %q", err, want)
	}
	fsys["tasks.jsonl"] = &fstest.MapFile{Data: []byte(strings.Replace(line, `,"framework":"go"`, "", 1))}
	tasks, err = Load(fsys, "tasks.jsonl")
	if err != nil || tasks[0].TestFramework() != FrameworkPytest {
		t.Errorf("no framework: %v, %v; want pytest", tasks, err)
	}
}
