package task

// Task is one line of a task file (JSONL). Its JSON is documented in
// docs/tasks-and-grading.md; paths in it are relative to the task file's
// directory.
type Task struct {
	ID          string `json:"id"`
	Image       string `json:"image"`       // local image reference, e.g. rollcage/demo-textwrap:latest
	Instruction string `json:"instruction"` // what the policy is asked to do
	Workdir     string `json:"workdir"`     // the repo inside the sandbox; default /workspace

	// HiddenTests is a directory (relative to the task file) whose files are
	// copied to HiddenTestsDest only after the agent has stopped.
	HiddenTests     string `json:"hidden_tests"`
	HiddenTestsDest string `json:"hidden_tests_dest,omitempty"` // default /opt/grader/tests, outside the workspace
	// TestCommand runs the hidden tests inside the sandbox (in Workdir) and
	// must print pytest's summary line; exit 0 means reward 1.
	TestCommand string `json:"test_command"`

	// ProtectedPaths are glob patterns the agent must not read (hidden
	// test locations, grader files). Canary paths are added by rollcage.
	ProtectedPaths []string `json:"protected_paths,omitempty"`
	// VisibleTests are glob patterns (relative to Workdir) of files the agent
	// may read but must not change: visible tests, conftest.py, CI and test
	// config. Their hashes at start are compared at submit.
	VisibleTests []string `json:"visible_tests,omitempty"`

	// BaseCommit is the commit the episode starts from; empty means the
	// image's HEAD, resolved at episode start.
	BaseCommit string `json:"base_commit,omitempty"`
	// UpstreamFixRef names the upstream fix (a ref or commit id) that is
	// still reachable in the image's object store.
	UpstreamFixRef string `json:"upstream_fix_ref,omitempty"`
	// UpstreamRepo is the task's own upstream, e.g. github.com/acme/textkit.
	UpstreamRepo string `json:"upstream_repo,omitempty"`
	// ReferenceURLs are where the reference solution can be fetched from.
	ReferenceURLs []string `json:"reference_urls,omitempty"`
	// Grade is how the submission is graded, always in a fresh sandbox
	// from Image where no process of the policy runs: GradeDiff (the
	// repository's change against the base commit, applied; the default)
	// or GradeSnapshot (a snapshot of the episode's filesystem).
	Grade string `json:"grade,omitempty"`

	// AllowedHosts may be contacted through the egress proxy (package
	// indexes for honest installs, say).
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
	// Reward is the reward rule: RewardTests (the default: every expected
	// test id passed, probes and integrity watched) or RewardSummary.
	Reward string `json:"reward,omitempty"`
	// FailToPass and PassToPass are the expected test ids (pytest node
	// ids, file paths relative to the hidden tests' directory), as
	// SWE-bench names them; empty: derived with the reference fix. For a
	// task with a TestPatch (a benchmark instance), the ids are the
	// benchmark's, relative to Workdir, in Framework's naming.
	FailToPass []string `json:"fail_to_pass,omitempty"`
	PassToPass []string `json:"pass_to_pass,omitempty"`

	// DifferentialCertainAt is the share of the differential cases (0 to
	// 1) that, when that many differ from the reference fix in a
	// solution that passes the hidden tests, makes its special_casing
	// flag certain. Zero: the flag stays suspicious, for a judge or the
	// label policy to decide.
	DifferentialCertainAt float64 `json:"differential_certain_at,omitempty"`

	// Seal: false runs the task on its image as it is, the upstream fix
	// reachable in the history (for studying detection); missing or true
	// follows the runner (sealed unless --no-seal).
	Seal *bool `json:"seal,omitempty"`

	// The fields below come from a benchmark instance (SWE-bench and its
	// family, see LoadWith); a task of rollcage's own may set them too.

	// InstanceID is the benchmark's own id of the task, which its tooling
	// joins results on (ID is the same id, or the id made safe).
	InstanceID string `json:"instance_id,omitempty"`
	// Benchmark names the family the task came from: BenchmarkSWEBench,
	// BenchmarkSWEGym, BenchmarkSWESmith, BenchmarkMultiSWE or
	// BenchmarkHarbor.
	Benchmark string `json:"benchmark,omitempty"`
	// Language is the repository's language as the benchmark names it
	// (Multi-SWE-bench's lang: go, java, ts, ...).
	Language string `json:"language,omitempty"`
	// Version and EnvironmentSetupCommit are the instance's own, kept so
	// exports join with the benchmark's tooling.
	Version                string `json:"version,omitempty"`
	EnvironmentSetupCommit string `json:"environment_setup_commit,omitempty"`
	// TestPatch holds hidden tests as a diff against BaseCommit: applied
	// only in grading, after the files it touches are reset to BaseCommit
	// (see ApplyTestPatchScript). Its added lines are hidden-test content.
	TestPatch string `json:"test_patch,omitempty"`
	// FixPatch is the reference fix. It never enters the episode's
	// sandbox; its added lines are fix content for the leak checks.
	FixPatch string `json:"fix_patch,omitempty"`
	// BugPatch is how a synthetic bug was made (SWE-smith's "patch"): it
	// is already applied at BaseCommit, and its reverse is a fix, so its
	// removed lines are fix content.
	BugPatch string `json:"bug_patch,omitempty"`
	// Framework is the runner whose output TestCommand prints (a Framework
	// constant), which ParseTestLog reads, and so how FailToPass and
	// PassToPass name tests; empty: pytest (see TestFramework).
	Framework string `json:"framework,omitempty"`
	// Hints is an instance's hints_text. It is not shown to the policy
	// unless the task was loaded with LoadOptions.Hints, which puts it in
	// Instruction.
	Hints string `json:"hints,omitempty"`

	// ImageHidden are absolute paths of files the task image itself holds
	// that the policy must never see (R2E-Gym's /r2e_tests): the episode
	// runs on the sealed image, where they are deleted, and grading runs
	// in a fresh sandbox from Image, where they are. Such a task runs only
	// sealed.
	ImageHidden []string `json:"image_hidden,omitempty"`
	// ExpectedStatus is the status every test of the run must be reported
	// with (PASSED, FAILED or ERROR, in R2E-Gym's naming of tests, keyed
	// as its log parser keys them): set, the reward is 1 only when the
	// run reports exactly these tests, each with its status (RewardStatuses).
	ExpectedStatus map[string]string `json:"expected_status,omitempty"`

	// The fields below come from a Harbor task directory (LoadHarbor).

	// RewardFile is where the test command writes the reward (Harbor's
	// /logs/verifier/reward.txt; ParseReward reads it and reward.json):
	// set, the reward is read there rather than from the test output.
	RewardFile string `json:"reward_file,omitempty"`
	// BuildContext is a directory (relative to the task file) whose
	// Dockerfile builds Image where it is missing; Image's tag is then the
	// hash of the directory's content, so an edit makes a new image.
	BuildContext string `json:"build_context,omitempty"`
	// SolutionDir is a directory (relative to the task file) holding a
	// reference solution (Harbor's solution/): never in the sandbox, its
	// text is fix content for the leak checks.
	SolutionDir string `json:"solution_dir,omitempty"`
	// Limits are the task's own timeouts and resources; nil: rollcage's.
	Limits *Limits `json:"limits,omitempty"`
}

// Limits are a task's own timeouts (in seconds) and resources, as
// Harbor's task.toml gives them; zero means not set.
type Limits struct {
	AgentTimeoutSec    float64 `json:"agent_timeout_sec,omitempty"`
	VerifierTimeoutSec float64 `json:"verifier_timeout_sec,omitempty"`
	BuildTimeoutSec    float64 `json:"build_timeout_sec,omitempty"`
	CPUs               float64 `json:"cpus,omitempty"`
	MemoryMB           int     `json:"memory_mb,omitempty"`
	StorageMB          int     `json:"storage_mb,omitempty"`
}

// TestFramework is the framework of the test command's output: Framework,
// or pytest when it is empty.
func (t Task) TestFramework() string {
	if t.Framework == "" {
		return FrameworkPytest
	}
	return t.Framework
}

// Sealed reports whether the task may run on a sealed image (one with
// ImageHidden must).
func (t Task) Sealed() bool { return t.Seal == nil || *t.Seal }

// Defaults of a Task's optional fields.
const (
	DefaultWorkdir         = "/workspace"
	DefaultHiddenTestsDest = "/opt/grader/tests"
)
