package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Benchmarks a task may come from (Task.Benchmark).
const (
	BenchmarkSWEBench = "swe-bench"
	BenchmarkSWEGym   = "swe-gym"
	BenchmarkSWESmith = "swe-smith"
)

// InstanceWorkdir is where the repository is in the images of the
// SWE-bench family.
const InstanceWorkdir = "/testbed"

// Image name templates of the benchmarks' published images. In a
// template, {instance_id} is the id as it is, {id} the id lowercased with
// "__" written "_1776_" (SWE-bench's naming, as Docker Hub refuses "__")
// and {id_s} the id lowercased with "__" written "_s_" (SWE-Gym's).
const (
	DefaultImageTemplate = "swebench/sweb.eval.x86_64.{id}:latest"
	SWEGymImageTemplate  = "xingyaoww/sweb.eval.x86_64.{id_s}:latest"
)

// LoadOptions say how benchmark instances become tasks. The zero value
// uses each benchmark's own image names and shows no hints.
type LoadOptions struct {
	// ImageTemplate, when set, names every instance's image (see
	// DefaultImageTemplate for the placeholders), overriding an image
	// the instance names itself (SWE-smith's image_name). Images are never
	// pulled: the name must be of an image present where episodes run.
	ImageTemplate string
	// Hints appends an instance's hints_text to its instruction.
	Hints bool
}

var placeholderRE = regexp.MustCompile(`\{[^{}]*\}`)

// Validate reports a template with a placeholder it does not know.
func (o LoadOptions) Validate() error {
	for _, p := range placeholderRE.FindAllString(o.ImageTemplate, -1) {
		switch p {
		case "{id}", "{id_s}", "{instance_id}":
		default:
			return fmt.Errorf("image template %q: unknown placeholder %s; use {id}, {id_s} or {instance_id}", o.ImageTemplate, p)
		}
	}
	return nil
}

// ImageName fills template (see DefaultImageTemplate) for the instance id.
func ImageName(template, id string) string {
	lower := strings.ToLower(id)
	return strings.NewReplacer(
		"{instance_id}", id,
		"{id}", strings.ReplaceAll(lower, "__", "_1776_"),
		"{id_s}", strings.ReplaceAll(lower, "__", "_s_"),
	).Replace(template)
}

// instance is a SWE-bench-family instance: SWE-bench's fields, the ones
// SWE-smith adds, and two of rollcage's own for repositories whose test
// command rollcage does not know. Other fields are ignored.
type instance struct {
	InstanceID             string     `json:"instance_id"`
	Repo                   string     `json:"repo"`
	BaseCommit             string     `json:"base_commit"`
	Patch                  string     `json:"patch"`
	TestPatch              string     `json:"test_patch"`
	ProblemStatement       string     `json:"problem_statement"`
	HintsText              string     `json:"hints_text"`
	Version                flexString `json:"version"`
	FailToPass             []string   `json:"-"` // FAIL_TO_PASS, read by testIDs
	PassToPass             []string   `json:"-"` // PASS_TO_PASS
	EnvironmentSetupCommit string     `json:"environment_setup_commit"`
	ImageName              string     `json:"image_name"` // SWE-smith
	Image                  string     `json:"image"`      // SWE-bench's task repositories

	TestCommand string `json:"test_command"`
	Framework   string `json:"framework"`
}

// flexString is a string some exports write as a number ("version": 3.0).
type flexString string

func (s *flexString) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		*s = flexString(str)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New("version is neither a string nor a number")
	}
	*s = flexString(n.String())
	return nil
}

// testIDs reads FAIL_TO_PASS or PASS_TO_PASS: a list of test ids, or (in
// the Hugging Face exports) a string holding that list as JSON. A missing
// field is an empty list.
func testIDs(keys map[string]json.RawMessage, field string) ([]string, error) {
	raw := keys[field]
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%s is not a list of test ids", field)
	}
	if err := json.Unmarshal([]byte(s), &list); err != nil {
		return nil, fmt.Errorf("%s is not a list of test ids (a string, but not a JSON list of strings)", field)
	}
	return list, nil
}

// instanceTask turns one SWE-bench-family instance into a Task:
//
//   - id and instance_id: instance_id; upstream_repo: github.com/ + repo;
//     base_commit: base_commit, where the episode's history is sealed;
//   - instruction: problem_statement (hints_text only with Hints);
//   - image: LoadOptions.ImageTemplate, else the instance's own image
//     name (SWE-smith's image_name), else the benchmark's template;
//     workdir /testbed;
//   - test_patch: test_patch, applied only in grading; fix_patch: patch
//     (SWE-bench, SWE-Gym), or bug_patch: patch (SWE-smith, whose patch
//     makes the bug); fail_to_pass, pass_to_pass: FAIL_TO_PASS, PASS_TO_PASS;
//   - test_command and framework: as the benchmark's harness runs the
//     tests of that repository and version (see sweTestCommand), or the
//     instance's own test_command and framework.
func instanceTask(data []byte, o LoadOptions) (Task, error) {
	var in instance
	if err := json.Unmarshal(data, &in); err != nil {
		return Task{}, jsonError(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return Task{}, jsonError(err)
	}
	var err error
	if in.FailToPass, err = testIDs(keys, "FAIL_TO_PASS"); err != nil {
		return Task{}, err
	}
	if in.PassToPass, err = testIDs(keys, "PASS_TO_PASS"); err != nil {
		return Task{}, err
	}
	for _, f := range []struct{ name, val string }{
		{"instance_id", in.InstanceID},
		{"problem_statement", in.ProblemStatement},
		{"base_commit", in.BaseCommit},
	} {
		if strings.TrimSpace(f.val) == "" {
			return Task{}, fmt.Errorf("%s is required", f.name)
		}
	}
	if len(in.FailToPass) == 0 {
		return Task{}, errors.New("FAIL_TO_PASS is empty, so nothing would show the instance solved; give the ids of the tests the fix makes pass")
	}
	t := Task{
		ID:                     in.InstanceID,
		InstanceID:             in.InstanceID,
		Instruction:            in.ProblemStatement,
		Workdir:                InstanceWorkdir,
		BaseCommit:             in.BaseCommit,
		Version:                string(in.Version),
		EnvironmentSetupCommit: in.EnvironmentSetupCommit,
		TestPatch:              in.TestPatch,
		FailToPass:             in.FailToPass,
		PassToPass:             in.PassToPass,
		Hints:                  in.HintsText,
		TestCommand:            in.TestCommand,
		Framework:              in.Framework,
	}
	if in.Repo != "" {
		t.UpstreamRepo = "github.com/" + in.Repo
	}
	if o.Hints && strings.TrimSpace(in.HintsText) != "" {
		t.Instruction += "\n\nHints:\n" + in.HintsText
	}
	template := SWEGymImageTemplate
	switch {
	case in.ImageName != "":
		t.Benchmark, t.BugPatch = BenchmarkSWESmith, in.Patch
		t.Image = in.ImageName
	case sweGymSpecs[strings.ToLower(in.Repo)] != nil:
		t.Benchmark, t.FixPatch = BenchmarkSWEGym, in.Patch
	default:
		t.Benchmark, t.FixPatch = BenchmarkSWEBench, in.Patch
		template = DefaultImageTemplate
	}
	if in.Image != "" {
		t.Image = in.Image
	}
	if o.ImageTemplate != "" {
		t.Image = ImageName(o.ImageTemplate, in.InstanceID)
	} else if t.Image == "" {
		t.Image = ImageName(template, in.InstanceID)
	}
	if t.Benchmark != BenchmarkSWESmith && strings.TrimSpace(in.TestPatch) == "" {
		return Task{}, errors.New("test_patch is empty; a SWE-bench instance's hidden tests come as its test patch")
	}
	if t.TestCommand == "" {
		cmd, fw, err := benchTestCommand(t, in.Repo)
		if err != nil {
			return Task{}, err
		}
		t.TestCommand = cmd
		if t.Framework == "" {
			t.Framework = fw
		}
	} else if t.Framework == "" {
		return Task{}, errors.New("test_command is given without framework; say which runner's output it prints: " + strings.Join(Frameworks(), ", "))
	}
	return t, nil
}

// repoSpec is how a benchmark's harness tests one repository at some of
// its versions.
type repoSpec struct {
	versions     []string
	testCmd      string
	install      string   // rerun before the tests, as the harness does
	evalCommands []string // environment set up before install and tests
}

// specFor finds the spec of repo at version.
func specFor(specs map[string][]repoSpec, repo, version string) (repoSpec, error) {
	list := specs[strings.ToLower(repo)]
	if list == nil {
		return repoSpec{}, fmt.Errorf("no test command is known for repository %q; add test_command and framework to the instance", repo)
	}
	for _, s := range list {
		if slices.Contains(s.versions, version) {
			return s, nil
		}
	}
	return repoSpec{}, fmt.Errorf("version %q of %s is not in the benchmark's specs; add test_command and framework to the instance", version, repo)
}

// SWE-smith's test command for a Python repository (its TEST_PYTEST),
// given the files of FAIL_TO_PASS.
const sweSmithPytest = "pytest --disable-warnings --color=no --tb=no --verbose"

// benchTestCommand is the test command t's benchmark runs, in the conda
// environment of its images, and the framework whose output it prints.
// SWE-bench and SWE-Gym: the repository's install step again, then its
// test command on the files the test patch touches (Django: as test
// modules; files with a non-test extension left out). SWE-smith (Python
// repositories): pytest on the files of the FAIL_TO_PASS ids.
func benchTestCommand(t Task, repo string) (string, string, error) {
	lines := []string{"source /opt/miniconda3/bin/activate", "conda activate testbed"}
	if t.Benchmark == BenchmarkSWESmith {
		var files []string
		for _, id := range t.FailToPass {
			file, _, ok := strings.Cut(id, "::")
			if !ok || !strings.HasSuffix(file, ".py") {
				return "", "", fmt.Errorf("FAIL_TO_PASS id %q is not a pytest node id; for a SWE-smith instance of another language add test_command and framework", id)
			}
			if !slices.Contains(files, file) {
				files = append(files, file)
			}
		}
		return strings.Join(append(lines, sweSmithPytest+" "+quoteArgs(files)), "\n"), FrameworkPytest, nil
	}
	specs := sweBenchSpecs
	if t.Benchmark == BenchmarkSWEGym {
		specs = sweGymSpecs
	}
	spec, err := specFor(specs, repo, t.Version)
	if err != nil {
		return "", "", err
	}
	directives := testDirectives(repo, t.TestPatch)
	if len(directives) == 0 {
		return "", "", errors.New("test_patch touches no test file, so there is nothing to run")
	}
	lines = append(lines, spec.evalCommands...)
	if spec.install != "" {
		lines = append(lines, spec.install)
	}
	lines = append(lines, spec.testCmd+" "+quoteArgs(directives))
	framework := FrameworkPytest
	switch strings.ToLower(repo) {
	case "django/django":
		framework = FrameworkDjango
	case "sympy/sympy":
		framework = FrameworkSympy
	}
	return strings.Join(lines, "\n"), framework, nil
}

// nonTestExts are the endings of files SWE-bench's harness does not pass
// to the test command ("csv" without its dot, as there).
var nonTestExts = []string{".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml"}

// testDirectives are the test command's arguments for a test patch: the
// files it touches, less data files; Django's as dotted test modules
// relative to tests/.
func testDirectives(repo, testPatch string) []string {
	var out []string
	for _, f := range patchTargets(testPatch) {
		if slices.ContainsFunc(nonTestExts, func(ext string) bool { return strings.HasSuffix(f, ext) }) {
			continue
		}
		if strings.EqualFold(repo, "django/django") {
			base := path.Base(f)
			if base != "tests.py" && !strings.HasPrefix(base, "test_") && !strings.Contains(f, "/tests/") && !strings.Contains(f, "/test_") {
				continue
			}
			f = strings.TrimSuffix(f, ".py")
			f = strings.TrimPrefix(f, "tests/")
			f = strings.ReplaceAll(f, "/", ".")
		}
		out = append(out, f)
	}
	return out
}

// patchTargets are the paths a patch's "diff --git" headers name on
// their b/ side, in order, as SWE-bench's harness reads them.
func patchTargets(patch string) []string {
	var out []string
	for _, line := range strings.Split(patch, "\n") {
		if m := diffHeaderRE.FindStringSubmatch(strings.TrimSuffix(line, "\r")); m != nil {
			out = append(out, m[2])
		}
	}
	return out
}

// quoteArgs joins args for bash, quoting those that need it.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=+,@%") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// validateByID checks the fields of a task graded by test id.
func (t Task) validateByID() error {
	if t.Framework != "" && !slices.Contains(Frameworks(), t.Framework) {
		return &FieldError{"framework", fmt.Sprintf("is %q; use one of %s", t.Framework, strings.Join(Frameworks(), ", "))}
	}
	for _, f := range []struct {
		name string
		ids  []string
	}{{"fail_to_pass", t.FailToPass}, {"pass_to_pass", t.PassToPass}} {
		for i, id := range f.ids {
			if strings.TrimSpace(id) == "" {
				return &FieldError{f.name, fmt.Sprintf("has an empty test id (entry %d)", i+1)}
			}
		}
	}
	switch t.Benchmark {
	case "", BenchmarkSWEBench, BenchmarkSWEGym, BenchmarkSWESmith, BenchmarkMultiSWE, BenchmarkR2EGym, BenchmarkHarbor:
	default:
		return &FieldError{"benchmark", fmt.Sprintf("is %q; use %s, %s, %s, %s, %s or %s", t.Benchmark, BenchmarkSWEBench, BenchmarkSWEGym, BenchmarkSWESmith, BenchmarkMultiSWE, BenchmarkR2EGym, BenchmarkHarbor)}
	}
	return nil
}
