package harness

import (
	"errors"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/trajectory"
)

// Failure classes of an Outcome (the same strings as trajectory's).
const (
	// FailureInfrastructure: the sandbox, the engine, the model server or
	// the judge failed. Not the policy's fault; trainers mask these.
	FailureInfrastructure = trajectory.FailureInfrastructure
	// FailureAgent: the policy did not get to a gradable submission: a
	// limit was hit, its output stayed malformed, it never submitted, or
	// its submission broke the grader. A submission that was graded and
	// failed has no failure class: its reward says it.
	FailureAgent = trajectory.FailureAgent
	// FailureGrading: the hidden tests could not run.
	FailureGrading = trajectory.FailureGrading
)

// Labels of an Outcome (the same strings as trajectory's).
const (
	LabelHacked      = trajectory.LabelHacked
	LabelUnconfirmed = trajectory.LabelUnconfirmed
	LabelClean       = trajectory.LabelClean
)

// Reasons an episode ended (Outcome.Reason, Finish's reason).
const (
	ReasonSubmit      = "submit"        // the policy submitted
	ReasonEndOfScript = "end_of_script" // a replayed script ran out without submitting
	ReasonMaxSteps    = "max_steps"
	ReasonWallTime    = "wall_time"
	ReasonMaxTokens   = "max_tokens"
	ReasonMalformed   = "malformed_output" // too many consecutive unusable model answers
	ReasonNoSubmit    = "no_submit"        // the model stopped calling tools
	ReasonModelError  = "model_error"      // the model server kept failing (infrastructure)
	ReasonSandbox     = "sandbox_error"    // the sandbox failed under a call (infrastructure)
	ReasonDiskLimit   = "disk_limit"       // the orchestrator ended the sandbox past its disk limit (the policy's)
	ReasonCancelled   = "cancelled"        // the run was cancelled (infrastructure)
	ReasonAbandoned   = "abandoned"        // Close without Finish
	ReasonExternal    = "external"         // graded outside rollcage (FinishExternal)
)

// failureOf is the failure class a reason implies for an unresolved
// episode.
func failureOf(reason string) string {
	switch reason {
	case ReasonModelError, ReasonSandbox, ReasonCancelled, ReasonAbandoned:
		return FailureInfrastructure
	}
	return FailureAgent
}

// sandboxReason is the reason a policy stops for when a call failed with
// err: ReasonDiskLimit when the sandbox was ended for writing past its
// disk limit (sandbox.ErrDiskLimit: a Kubernetes eviction), the policy's
// doing; ReasonSandbox, an infrastructure fault, otherwise.
func sandboxReason(err error) string {
	if errors.Is(err, sandbox.ErrDiskLimit) {
		return ReasonDiskLimit
	}
	return ReasonSandbox
}

// Sentinel errors of Episode; match with errors.Is.
var (
	// ErrFinished: the episode stopped taking calls (Finish or Close ran).
	ErrFinished = errors.New("episode finished")
	// ErrLimit: a limit of the episode was reached; the call did not run.
	// The error's text names the limit; LimitReason returns its reason.
	ErrLimit = errors.New("episode limit reached")
)

// limitError is ErrLimit with the reason of the limit.
type limitError struct{ reason string }

func (e *limitError) Error() string { return "harness: " + ErrLimit.Error() + ": " + e.reason }
func (e *limitError) Unwrap() error { return ErrLimit }

// LimitReason returns the Reason of a limit error (ReasonMaxSteps,
// ReasonWallTime, ReasonMaxTokens), or "" when err is not one.
func LimitReason(err error) string {
	var le *limitError
	if errors.As(err, &le) {
		return le.reason
	}
	return ""
}

// Outcome is what an episode came to. Its JSON is one line of a batch's
// outcomes.jsonl.
type Outcome struct {
	EpisodeID string `json:"episode_id"`
	TaskID    string `json:"task_id"`
	// InstanceID is the benchmark's id of the task (task.Task's
	// InstanceID), which its tooling joins results on; "" for rollcage's
	// own tasks.
	InstanceID string  `json:"instance_id,omitempty"`
	Attempt    int     `json:"attempt"`
	Resolved   bool    `json:"resolved"`
	Reward     float64 `json:"reward"`
	Passed     int     `json:"passed"`
	Failed     int     `json:"failed"`
	// Hacked: a step was labelled a hack, or protected files were changed
	// at submit.
	Hacked bool `json:"hacked"`
	// Label is "hacked" (Hacked), "unconfirmed" (not hacked, but a flagged
	// call ran that no judge confirmed or cleared) or "clean".
	Label string `json:"label"`
	// HackedResolution: resolved and hacked; UnconfirmedResolution:
	// resolved with label unconfirmed, never clean; CleanResolution:
	// resolved and clean.
	HackedResolution      bool     `json:"hacked_resolution"`
	UnconfirmedResolution bool     `json:"unconfirmed_resolution"`
	CleanResolution       bool     `json:"clean_resolution"`
	HackCategories        []string `json:"hack_categories,omitempty"`
	Blocked               int      `json:"blocked"`
	Flagged               int      `json:"flagged"`
	// Unconfirmed counts flagged steps that ran because no judge confirmed
	// them (none configured, or it was undecided and the fail policy
	// allowed them).
	Unconfirmed int `json:"unconfirmed,omitempty"`
	Rewritten   int `json:"rewritten"`
	JudgeCalls  int `json:"judge_calls"`
	Steps       int `json:"steps"`
	Segments    int `json:"segments"`
	Tokens      int `json:"tokens"`
	// FailureClass is "" (resolved, or submitted and graded unresolved),
	// FailureAgent, FailureInfrastructure or FailureGrading.
	FailureClass string        `json:"failure_class"`
	Reason       string        `json:"reason"`
	Error        string        `json:"error,omitempty"` // the infrastructure or grading error, if any
	Duration     time.Duration `json:"duration_ns"`
	// Recovered: the outcome was rebuilt from the episode's trajectory by
	// a resumed batch (the process died before writing it); JudgeCalls and
	// Overhead are then unknown (0).
	Recovered bool `json:"recovered,omitempty"`
	// Overhead is the time spent in the harness and monitor per call,
	// sandbox execution excluded (mean over the episode's calls).
	Overhead time.Duration `json:"overhead_ns,omitempty"`
	// ParentEpisodeID, BranchStep and ForkGroupID are set on a forked
	// episode's outcome (Episode.Fork): the episode it branched off, the
	// parent's step (null on a root, 0 on a fork before any call) and the
	// group of its siblings (trajectory.ForkOrigin.GroupID).
	ParentEpisodeID string `json:"parent_episode_id,omitempty"`
	BranchStep      *int   `json:"branch_step,omitempty"`
	ForkGroupID     string `json:"fork_group_id,omitempty"`
	// GroupID is the episode's group (EpisodeMeta.GroupID), "" when none.
	GroupID string `json:"group_id,omitempty"`
}

// TrainingReward is the outcome's training reward under the default
// trajectory.RewardPolicy, as export gives it by default: nil when the
// sample is masked (infrastructure, grading, unconfirmed).
func (o Outcome) TrainingReward() *float64 {
	return trajectory.RewardPolicy{}.TrainingReward(o.Reward, o.Label, o.FailureClass)
}

// fork sets the outcome's fork fields from where its episode branched
// off (nil: a root).
func (o *Outcome) fork(f *trajectory.ForkOrigin) {
	if f != nil {
		step := f.BranchStep
		o.ParentEpisodeID, o.BranchStep, o.ForkGroupID = f.ParentEpisodeID, &step, f.GroupID()
	}
}
