package monitor

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ArgsError is a call refused before it runs because its arguments cannot
// be run as they are (the gateway answers it 400, or an MCP error result).
// Nothing is numbered or recorded for it.
type ArgsError struct {
	Field   string // "args", "args.command", ...
	Problem string // what is wrong and what to give instead
}

func (e *ArgsError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Problem) }

// Check prepares a call that comes from outside rollcage's own loop (the
// gateway's /calls and MCP): a foreign tool name (OpenHands' execute_bash
// and str_replace_editor, SWE-agent's, ...) is mapped onto rollcage's
// tools (FromForeign, the mapping the audit reads trajectories with), and
// a bash call whose arguments cannot run (not an object, no command, a
// timeout_sec outside 0 to maxTimeout) is an *ArgsError. Other calls pass
// as they are: what is wrong with them is the policy's to see, as an
// error output.
func Check(call ToolCall, maxTimeout time.Duration) (ToolCall, error) {
	if !IsTool(call.Tool) && IsForeign(call.Tool) {
		mapped := FromForeign(call.Tool, string(call.Args))
		call.Tool, call.Args = mapped.Tool, mapped.Args
	}
	if call.Tool != ToolBash {
		return call, nil
	}
	var a BashArgs
	if len(call.Args) > 0 {
		if err := json.Unmarshal(call.Args, &a); err != nil {
			return call, &ArgsError{"args", `bash takes {"command": "...", "timeout_sec": N}: ` + strings.TrimPrefix(err.Error(), "json: ")}
		}
	}
	if strings.TrimSpace(a.Command) == "" {
		return call, &ArgsError{"args.command", "missing or empty: give the command to run"}
	}
	if max := maxTimeout.Seconds(); a.TimeoutSec < 0 || a.TimeoutSec > max {
		return call, &ArgsError{"args.timeout_sec", fmt.Sprintf("%v is out of range: give 0 (the episode's per-call timeout) to %v seconds", a.TimeoutSec, max)}
	}
	return call, nil
}
