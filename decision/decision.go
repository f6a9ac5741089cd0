package decision

import (
	"errors"
	"time"

	"github.com/rollcage/rollcage/judge"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
)

// Action is what the monitor did with a call.
type Action string

const (
	// Allow: the call ran as asked.
	Allow Action = "allow"
	// Block: the call did not run; the policy got dummy output.
	Block Action = "block"
	// Rewrite: a safe form of the call ran (history restricted to the
	// base commit's ancestry) and its output was shown.
	Rewrite Action = "rewrite"
)

// Decision is the monitor's judgement of one call.
type Decision struct {
	Action Action `json:"action"`
	// Flags are the rules' findings before execution; PostFlags those of the
	// output check (canary opens, leaked protected material, effects).
	Flags     []rules.Flag   `json:"flags,omitempty"`
	PostFlags []rules.Flag   `json:"post_flags,omitempty"`
	Verdict   *judge.Verdict `json:"verdict,omitempty"`
	// Hack labels the step as an attempted hack (blocked, rewritten,
	// confirmed or leaking); the reward is not changed by it.
	Hack bool `json:"hack"`
	// Unconfirmed: flagged, allowed, and no judge confirmed or cleared it.
	Unconfirmed bool `json:"unconfirmed,omitempty"`
	// Cleared: flagged, and the judge said it is not a hack.
	Cleared  bool   `json:"cleared,omitempty"`
	Category string `json:"category,omitempty"` // category of the deciding flag
	Reason   string `json:"reason,omitempty"`
	// Rewritten is the command that ran instead (Rewrite).
	Rewritten string `json:"rewritten,omitempty"`
}

// Timings of one call through the monitor.
type Timings struct {
	Normalize time.Duration `json:"normalize_ns"`
	Rules     time.Duration `json:"rules_ns"`
	Judge     time.Duration `json:"judge_ns,omitempty"`
	Exec      time.Duration `json:"exec_ns,omitempty"`
	Check     time.Duration `json:"check_ns,omitempty"`
	Total     time.Duration `json:"total_ns"`
}

// CallResult is one call's way through the monitor: what was asked, what was
// decided, what the policy is shown.
type CallResult struct {
	Step       int                 `json:"step"`
	Call       toolcall.Call       `json:"call"`
	Normalized toolcall.Normalized `json:"normalized"`
	Decision   Decision            `json:"decision"`
	// Output is what the policy sees: the real output, or dummy output.
	Output   string `json:"output"`
	ExitCode int    `json:"exit_code"`
	Dummy    bool   `json:"dummy,omitempty"`
	// Exec is the sandbox's own result when the call ran (nil when blocked
	// or for tools that do not exec). Never shown to the policy when Dummy.
	Exec   *sandbox.ExecResult `json:"exec,omitempty"`
	Submit bool                `json:"submit,omitempty"` // the policy submitted
	// Effects are what the call did to the sandbox's files, as the agent's
	// watch saw them (bash) or as the monitor did them (write_file, edit);
	// EffectsTruncated: some were lost.
	Effects          []sandbox.Effect `json:"effects,omitempty"`
	EffectsTruncated bool             `json:"effects_truncated,omitempty"`
	Timings          Timings          `json:"timings"`
	// Cut, when above 0, is the bound a read_file's output was cut at
	// (the monitor's MaxOutput): Output holds only the file's start.
	// Escaped: the file is not UTF-8; Output shows its invalid bytes as
	// \xNN. A caller that hands the file on as bytes (the E2B API) says
	// so instead of passing a changed file.
	Cut     int  `json:"cut,omitempty"`
	Escaped bool `json:"escaped,omitempty"`
}

// ErrInputRefused wraps the error of a streamed command's input that the
// rules refused: the input was not written, and the command runs on.
var ErrInputRefused = errors.New("input refused by the monitor")
