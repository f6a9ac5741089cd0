package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// BenchmarkMultiSWE marks a task loaded from a Multi-SWE-bench (or
// Multi-SWE-RL) instance.
const BenchmarkMultiSWE = "multi-swe-bench"

// MultiSWEImageTemplate is the name Multi-SWE-bench's harness gives an
// instance's image (harness/image.py: mswebench/<org>_m_<repo>:pr-<number>,
// lowercased). Those images hold the fix and the test patch under /home,
// so rollcage runs an instance only on an image named by
// LoadOptions.ImageTemplate, built without them.
const MultiSWEImageTemplate = "mswebench/{org}_m_{repo}:pr-{number}"

// msbInstance is a Multi-SWE-bench instance (harness/dataset.py, a
// PullRequest with its test report), plus rollcage's test_command and
// framework. Other fields (title, body, run results) are ignored: the
// pull request's own text describes the fix.
type msbInstance struct {
	InstanceID string     `json:"instance_id"`
	Org        string     `json:"org"`
	Repo       string     `json:"repo"`
	Number     flexString `json:"number"`
	Lang       string     `json:"lang"`
	Base       struct {
		Sha string `json:"sha"`
	} `json:"base"`
	ResolvedIssues []struct {
		Title string `json:"title"`
		Body  string `json:"body"`
	} `json:"resolved_issues"`
	FixPatch  string `json:"fix_patch"`
	TestPatch string `json:"test_patch"`
	Hints     string `json:"hints"`
	// The tests by how they went from the test patch's run to the fix's:
	// failed, skipped or missing before and passing after, or passing on
	// both. Keys are the harness parser's test names.
	F2P map[string]json.RawMessage `json:"f2p_tests"`
	S2P map[string]json.RawMessage `json:"s2p_tests"`
	N2P map[string]json.RawMessage `json:"n2p_tests"`
	P2P map[string]json.RawMessage `json:"p2p_tests"`

	TestCommand string `json:"test_command"`
	Framework   string `json:"framework"`
}

// isMultiSWE reports whether an instance's keys are Multi-SWE-bench's.
func isMultiSWE(keys map[string]json.RawMessage) bool {
	return keys["f2p_tests"] != nil || (keys["fix_patch"] != nil && keys["org"] != nil)
}

// multiSWETask turns a Multi-SWE-bench instance into a Task, as its
// harness grades it (gen_report.py: every f2p, s2p, n2p and p2p test of
// the dataset must pass with the submission and the test patch):
//
//   - id and instance_id: instance_id, else <org>__<repo>-<number>;
//     upstream_repo github.com/<org>/<repo>; base_commit: base.sha;
//   - instruction: the resolved issues' titles and bodies (hints only
//     with Hints); language: lang;
//   - test_patch, fix_patch: test_patch, fix_patch; fail_to_pass: the
//     keys of f2p_tests, s2p_tests and n2p_tests; pass_to_pass: of
//     p2p_tests;
//   - workdir /home/<repo>, where the harness's images hold the
//     repository; image: LoadOptions.ImageTemplate, which must be set,
//     as the harness's own images hold the fix and the tests;
//   - test_command and framework: the instance's own, which must be set,
//     as the harness keeps each repository's command in its Python code
//     (run.sh of the repository's image, without the test patch's git
//     apply, which rollcage does).
func multiSWETask(data []byte, o LoadOptions) (Task, error) {
	var in msbInstance
	if err := json.Unmarshal(data, &in); err != nil {
		return Task{}, jsonError(err)
	}
	for _, f := range []struct{ name, val string }{
		{"org", in.Org}, {"repo", in.Repo}, {"number", string(in.Number)}, {"base.sha", in.Base.Sha},
	} {
		if strings.TrimSpace(f.val) == "" {
			return Task{}, fmt.Errorf("a Multi-SWE-bench instance without %s; give org, repo, number and base.sha", f.name)
		}
	}
	id := in.InstanceID
	if id == "" {
		id = in.Org + "__" + in.Repo + "-" + string(in.Number)
	}
	var issues []string
	for _, is := range in.ResolvedIssues {
		if text := strings.TrimSpace(is.Title + "\n\n" + is.Body); text != "" {
			issues = append(issues, text)
		}
	}
	if len(issues) == 0 {
		return Task{}, errors.New("resolved_issues is empty, so nothing states the problem; give the issue the pull request resolves")
	}
	if strings.TrimSpace(in.TestPatch) == "" {
		return Task{}, errors.New("test_patch is empty; a Multi-SWE-bench instance's hidden tests come as its test patch")
	}
	f2p := slices.Sorted(maps.Keys(in.F2P))
	f2p = append(f2p, slices.Sorted(maps.Keys(in.S2P))...)
	f2p = append(f2p, slices.Sorted(maps.Keys(in.N2P))...)
	if len(f2p) == 0 {
		return Task{}, errors.New("f2p_tests, s2p_tests and n2p_tests are empty, so nothing would show the instance solved; give the tests the fix makes pass")
	}
	t := Task{
		ID: id, InstanceID: id, Benchmark: BenchmarkMultiSWE, Language: in.Lang,
		Instruction: strings.Join(issues, "\n\n"), Hints: in.Hints,
		Workdir:      "/home/" + in.Repo,
		BaseCommit:   in.Base.Sha,
		UpstreamRepo: "github.com/" + in.Org + "/" + in.Repo,
		TestPatch:    in.TestPatch, FixPatch: in.FixPatch,
		FailToPass: f2p, PassToPass: slices.Sorted(maps.Keys(in.P2P)),
		TestCommand: in.TestCommand, Framework: in.Framework,
	}
	if o.Hints && strings.TrimSpace(in.Hints) != "" {
		t.Instruction += "\n\nHints:\n" + in.Hints
	}
	if t.TestCommand == "" || t.Framework == "" {
		return Task{}, fmt.Errorf("a Multi-SWE-bench instance runs its tests by commands its harness keeps per repository; add test_command (the repository's run.sh, run in %s after rollcage applies the test patch) and framework (%s)",
			t.Workdir, strings.Join(Frameworks(), ", "))
	}
	if err := t.validateByID(); err != nil {
		return Task{}, err
	}
	if o.ImageTemplate == "" {
		own := strings.ToLower(strings.NewReplacer("{org}", in.Org, "{repo}", in.Repo, "{number}", string(in.Number)).Replace(MultiSWEImageTemplate))
		return Task{}, fmt.Errorf("image %s, as Multi-SWE-bench's harness builds it, holds the fix and the test patch (/home/fix.patch, /home/test.patch), where the agent could read them: build one without them and name it with --image-template", own)
	}
	t.Image = ImageName(o.ImageTemplate, id)
	return t, nil
}
