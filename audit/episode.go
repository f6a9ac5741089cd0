package audit

import (
	"bytes"
	"encoding/json"

	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// Formats a Trace can be read from.
const (
	FormatRollcage  = "rollcage"  // trajectory events (a Store dir or .jsonl files)
	FormatOpenAI    = "openai"    // OpenAI chat messages with tool_calls
	FormatMiniSWE   = "mini-swe"  // mini-swe-agent: bash blocks in assistant text
	FormatSWEAgent  = "swe-agent" // SWE-agent .traj
	FormatOpenHands = "openhands" // OpenHands output.jsonl event history
)

// Trace is one agent attempt as read from a file, in rollcage's tool
// model.
type Trace struct {
	ID     string `json:"id"`
	Source string `json:"source"` // file, with :line for JSONL episodes
	Format string `json:"format"`
	TaskID string `json:"task_id,omitempty"`
	// Task is the task context found in the trajectory's metadata; a tasks
	// file given to the Auditor fills in what it lacks.
	Task *Task `json:"task,omitempty"`
	// Resolved is nil when the data does not say.
	Resolved *bool `json:"resolved,omitempty"`
	// Patch is the final patch (a unified diff), when the data has it.
	Patch string `json:"patch,omitempty"`
	Steps []Step `json:"steps"`
	// Online is what rollcage decided while the episode ran (rollcage
	// format only).
	Online *Online `json:"online,omitempty"`
	// Facts are the sandbox facts the online monitor had (rollcage format,
	// from episode_start); nil elsewhere, where they are inferred.
	Facts *monitor.Facts `json:"-"`
}

// Step is one tool call and what the model saw of it.
type Step struct {
	Call toolcall.Call `json:"call"`
	// Original is the call as the source wrote it when it was mapped
	// (a SWE-agent action, a foreign tool's name and arguments).
	Original string `json:"original,omitempty"`
	// Index is where the call sits in the source: the message index
	// (OpenAI and mini-swe-agent messages, OpenHands llm_completions, whose
	// final response is len(messages)), the trajectory index (SWE-agent),
	// the event id (OpenHands output.jsonl), the step (rollcage). Labels
	// name steps by it.
	Index  int    `json:"index"`
	Output string `json:"output"`
	// Cwd is the session's directory after the call, when recorded.
	Cwd string `json:"cwd,omitempty"`
	// Recorded is the online decision (rollcage format only).
	Recorded *trajectory.Decision `json:"recorded,omitempty"`
	// prep is Call with the arguments the reader built, typed; zero when
	// it built none (rollcage's own records).
	prep toolcall.Prepared
}

// set makes p the step's call.
func (s *Step) set(p toolcall.Prepared) { s.Call, s.prep = p.Call, p }

// prepared is the step's call with the typed arguments its reader built,
// while Call is still the call they were built for; else Call alone, whose
// arguments the normalizer then decodes.
func (s Step) prepared() toolcall.Prepared {
	if p := s.prep; p.Call.Tool == s.Call.Tool && bytes.Equal(p.Call.Args, s.Call.Args) {
		p.Call = s.Call
		return p
	}
	return toolcall.Prepared{Call: s.Call}
}

// Online is what an episode's own run recorded about itself.
type Online struct {
	Hacked   bool `json:"hacked"`
	Resolved bool `json:"resolved"`
	Finished bool `json:"finished"`
}

// recordedFlags decodes a recorded decision's flags; garbage is none.
func recordedFlags(d *trajectory.Decision) []rules.Flag {
	if d == nil || len(d.Flags) == 0 {
		return nil
	}
	var f []rules.Flag
	if json.Unmarshal(d.Flags, &f) != nil {
		return nil
	}
	return f
}

func boolPtr(b bool) *bool { return &b }
