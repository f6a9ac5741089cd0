package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
)

// BenchmarkR2EGym marks a task loaded from an R2E-Gym instance.
const BenchmarkR2EGym = "r2e-gym"

// RewardStatuses is the reward rule of a task with ExpectedStatus
// (R2E-Gym's): 1 when the run reports exactly the expected tests, each
// with its expected status, failures included.
const RewardStatuses = "statuses"

// R2E-Gym's image layout (R2E-Gym/R2E-Gym at 69bc953,
// repo_analysis/base_dockerfiles/Dockerfile.*): the repository at
// /testbed at the commit before the fix, its test command in
// /testbed/run_tests.sh (pytest -rA r2e_tests, run in /testbed), the
// hidden tests at /r2e_tests.
const (
	r2eTests    = "/r2e_tests"
	r2eRunTests = InstanceWorkdir + "/run_tests.sh"
)

// r2eTestCommand is how R2E-Gym's runtime runs an instance's tests
// (agenthub/runtime/docker.py, setup_env and run_tests): the hidden tests
// linked into the repository as r2e_tests, then the image's run_tests.sh
// in /testbed. Whatever the submission put at r2e_tests goes first.
const r2eTestCommand = "rm -rf r2e_tests && ln -s " + r2eTests + " r2e_tests\nbash run_tests.sh"

// r2eInstance is an R2E-Gym instance (the R2E-Gym datasets' fields that
// agenthub/runtime/docker.py reads). Other fields are ignored.
type r2eInstance struct {
	RepoName            string `json:"repo_name"`
	DockerImage         string `json:"docker_image"`
	CommitHash          string `json:"commit_hash"`
	ParsedCommitContent string `json:"parsed_commit_content"`
	ProblemStatement    string `json:"problem_statement"`
	ExpectedOutputJSON  string `json:"expected_output_json"`
}

// r2eCommit is the part of R2E-Gym's ParsedCommit
// (commit_models/diff_classes.py) rollcage reads: the commits around the
// fix and the fix's hunks.
type r2eCommit struct {
	OldCommitHash string `json:"old_commit_hash"`
	NewCommitHash string `json:"new_commit_hash"`
	FileDiffs     []struct {
		Header struct {
			File struct {
				Path string `json:"path"`
			} `json:"file"`
		} `json:"header"`
		Hunks []struct {
			Descriptor struct {
				OldRange r2eRange `json:"old_range"`
				NewRange r2eRange `json:"new_range"`
				Section  string   `json:"section"`
			} `json:"descriptor"`
			LineGroup struct {
				AllLines []struct {
					Content string `json:"content"`
					Type    string `json:"type"`
				} `json:"all_lines"`
			} `json:"line_group"`
		} `json:"hunks"`
	} `json:"file_diffs"`
}

type r2eRange struct {
	Start  int  `json:"start"`
	Length *int `json:"length"`
}

func (r r2eRange) String() string {
	if r.Length == nil {
		return fmt.Sprint(r.Start)
	}
	return fmt.Sprintf("%d,%d", r.Start, *r.Length)
}

// isR2EGym reports whether an instance's keys are R2E-Gym's.
func isR2EGym(keys map[string]json.RawMessage) bool {
	return keys["expected_output_json"] != nil || keys["parsed_commit_content"] != nil
}

var issueRE = regexp.MustCompile(`(?s)\[ISSUE\](.*)\[/ISSUE\]`)

// r2eGymTask turns an R2E-Gym instance into a Task, graded as R2E-Gym's
// runtime grades it (_calculate_reward_r2e):
//
//   - id and instance_id: <repo_name>__<new commit>; image: docker_image
//     (or LoadOptions.ImageTemplate); workdir /testbed; base_commit: the
//     parsed commit's old_commit_hash, the image's HEAD;
//   - instruction: problem_statement's [ISSUE] block, or all of it;
//   - image_hidden: /r2e_tests and /testbed/run_tests.sh, deleted from
//     the episode's sealed image (as R2E-Gym moves them out of the
//     agent's way, but for good), present in grading; protected_paths:
//     the hidden tests';
//   - expected_status: expected_output_json, keyed as R2E-Gym keys it;
//     fail_to_pass: its PASSED tests (R2E-Gym records no status before
//     the fix, so none is told apart as pass-to-pass);
//   - fix_patch: the parsed commit's hunks of non-test files, for the
//     leak checks;
//   - test_command: r2eTestCommand.
func r2eGymTask(data []byte, o LoadOptions) (Task, error) {
	var in r2eInstance
	if err := json.Unmarshal(data, &in); err != nil {
		return Task{}, jsonError(err)
	}
	for _, f := range []struct{ name, val string }{
		{"repo_name", in.RepoName}, {"docker_image", in.DockerImage}, {"parsed_commit_content", in.ParsedCommitContent},
		{"problem_statement", in.ProblemStatement}, {"expected_output_json", in.ExpectedOutputJSON},
	} {
		if strings.TrimSpace(f.val) == "" {
			return Task{}, fmt.Errorf("an R2E-Gym instance without %s; give repo_name, docker_image, parsed_commit_content, problem_statement and expected_output_json", f.name)
		}
	}
	var c r2eCommit
	if err := json.Unmarshal([]byte(in.ParsedCommitContent), &c); err != nil {
		return Task{}, fmt.Errorf("parsed_commit_content is not R2E-Gym's parsed commit JSON: %v", err)
	}
	if !hexRE.MatchString(c.OldCommitHash) || !hexRE.MatchString(c.NewCommitHash) {
		return Task{}, errors.New("parsed_commit_content has no old_commit_hash and new_commit_hash commit ids; the episode starts from the old one")
	}
	expected, err := r2eExpected(in.ExpectedOutputJSON)
	if err != nil {
		return Task{}, err
	}
	instruction := in.ProblemStatement
	if m := issueRE.FindStringSubmatch(instruction); m != nil {
		instruction = m[1]
	}
	id := in.RepoName + "__" + c.NewCommitHash
	t := Task{
		ID: id, InstanceID: id, Benchmark: BenchmarkR2EGym,
		Instruction: strings.TrimSpace(instruction),
		Image:       in.DockerImage,
		Workdir:     InstanceWorkdir,
		BaseCommit:  c.OldCommitHash,
		ImageHidden: []string{r2eTests, r2eRunTests},
		// Gone from the episode's image; a look for them is still an
		// attempt the rules label.
		ProtectedPaths: []string{r2eTests, r2eTests + "/**", "**/r2e_tests/**"},
		ExpectedStatus: expected,
		FixPatch:       c.fixPatch(),
		TestCommand:    r2eTestCommand,
		Framework:      FrameworkPytest,
	}
	for _, id := range slices.Sorted(maps.Keys(expected)) {
		if expected[id] == "PASSED" {
			t.FailToPass = append(t.FailToPass, id)
		}
	}
	if o.ImageTemplate != "" {
		t.Image = ImageName(o.ImageTemplate, id)
	}
	if err := t.validateImageHidden(); err != nil {
		return Task{}, err
	}
	return t, nil
}

// r2eExpected reads expected_output_json as R2E-Gym compares it: colour
// codes dropped from the keys, a key cut at " - ".
func r2eExpected(s string) (map[string]string, error) {
	var raw map[string]string
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, errors.New("expected_output_json is not a JSON object of test names and statuses (a string holding one)")
	}
	if len(raw) == 0 {
		return nil, errors.New("expected_output_json names no tests, so nothing would show the instance solved")
	}
	out := map[string]string{}
	for k, v := range raw {
		out[r2eKey(k)] = v
	}
	return out, nil
}

var r2eColourRE = regexp.MustCompile(`\x1b\[\d+m`)

// r2eKey is a test name as R2E-Gym compares it (decolor_dict_keys, then
// k.split(" - ")[0]).
func r2eKey(k string) string {
	k = r2eColourRE.ReplaceAllString(k, "")
	k, _, _ = strings.Cut(k, " - ")
	return k
}

// fixPatch is the commit's change of its non-test files (R2E-Gym's
// FileDiff.is_test_file), as a unified diff.
func (c r2eCommit) fixPatch() string {
	var b strings.Builder
	for _, fd := range c.FileDiffs {
		p := fd.Header.File.Path
		if p == "" || r2eIsTestFile(p) || len(fd.Hunks) == 0 {
			continue
		}
		fmt.Fprintf(&b, "diff --git a/%s b/%s\n--- a/%s\n+++ b/%s\n", p, p, p, p)
		for _, h := range fd.Hunks {
			fmt.Fprintf(&b, "@@ -%s +%s @@", h.Descriptor.OldRange, h.Descriptor.NewRange)
			if h.Descriptor.Section != "" {
				b.WriteString(" " + h.Descriptor.Section)
			}
			b.WriteByte('\n')
			for _, l := range h.LineGroup.AllLines {
				prefix := map[string]string{"context": " ", "added": "+", "deleted": "-"}[l.Type]
				if prefix == "" {
					continue // a note ("\ No newline at end of file")
				}
				b.WriteString(prefix + l.Content + "\n")
			}
		}
	}
	return b.String()
}

// r2eIsTestFile is R2E-Gym's FileDiff.is_test_file.
func r2eIsTestFile(p string) bool {
	parts := strings.Split(p, "/")
	return strings.HasSuffix(p, "_test.py") || strings.HasPrefix(p, "test_") || strings.HasPrefix(path.Base(p), "test_") ||
		slices.Contains(parts, "tests") || slices.Contains(parts, "Tests") || slices.Contains(parts, "test") || slices.Contains(parts, "Test")
}

// validateImageHidden checks image_hidden and expected_status.
func (t Task) validateImageHidden() error {
	for _, p := range t.ImageHidden {
		if !path.IsAbs(p) || path.Clean(p) == "/" || strings.Contains(p, "'") {
			return &FieldError{"image_hidden", fmt.Sprintf("has %q; give absolute paths below / without quotes", p)}
		}
	}
	if len(t.ImageHidden) > 0 {
		switch {
		case !t.Sealed():
			return &FieldError{"seal", "is false, but the image holds hidden tests (image_hidden) that only its sealed image is without; drop \"seal\": false"}
		case t.Grade == GradeSnapshot:
			return &FieldError{"grade", "is snapshot, but the hidden tests (image_hidden) are only in the task image; use diff"}
		}
	}
	for id, s := range t.ExpectedStatus {
		if r2eStatus(s) == "" {
			return &FieldError{"expected_status", fmt.Sprintf("gives %q the status %q; use PASSED, FAILED or ERROR", id, s)}
		}
	}
	if len(t.ExpectedStatus) > 0 && t.Reward == RewardSummary {
		return &FieldError{"reward", "is summary, but expected_status asks every test for its status; drop one of them"}
	}
	return nil
}

// r2eStatus is an R2E-Gym status as a Status; "" for another word.
func r2eStatus(s string) Status {
	switch s {
	case "PASSED":
		return StatusPassed
	case "FAILED":
		return StatusFailed
	case "ERROR":
		return StatusError
	}
	return ""
}

// ParseR2ELog reads a test log as R2E-Gym's parse_log_pytest
// (repo_analysis/execution_log_parser.py) does: the lines after pytest's
// "short test summary info", each with PASSED, FAILED or ERROR, keyed by
// the node id less its file, joined with "." and cut at " - ". Later
// lines win, as there.
func ParseR2ELog(log string) map[string]Status {
	out := map[string]Status{}
	log = ansiRE.ReplaceAllString(strings.ReplaceAll(log, "\r", ""), "")
	_, after, ok := strings.Cut(log, "short test summary info")
	if !ok {
		return out
	}
	for _, line := range strings.Split(strings.TrimSpace(after), "\n") {
		var st Status
		switch {
		case strings.Contains(line, "PASSED"):
			st = StatusPassed
		case strings.Contains(line, "FAILED"):
			st = StatusFailed
		case strings.Contains(line, "ERROR"):
			st = StatusError
		default:
			continue
		}
		name := strings.Join(strings.Split(line, "::")[1:], ".")
		if st != StatusPassed {
			name, _, _ = strings.Cut(name, " - ")
		}
		out[r2eKey(name)] = st
	}
	return out
}

// r2eName is a pytest node id as R2E-Gym's parser names the test:
// r2e_tests/test_1.py::TestA::test_b is TestA.test_b.
func r2eName(nodeID string) string {
	return r2eKey(strings.Join(strings.Split(nodeID, "::")[1:], "."))
}
