package monitor

import (
	"fmt"
	"strings"
	"time"

	"github.com/rollcage/rollcage/toolcall"
)

// Check prepares a call that comes from outside rollcage's own loop (the
// gateway's /calls and MCP): a foreign tool name (OpenHands' execute_bash
// and str_replace_editor, SWE-agent's, ...) is mapped onto rollcage's
// tools (FromForeign, the mapping the audit reads trajectories with), and
// a bash call whose arguments cannot run (not an object, no command, a
// timeout_sec outside 0 to maxTimeout) is an *ArgsError. Other calls pass
// as they are: what is wrong with them is the policy's to see, as an
// error output. The arguments are decoded here, once, by the tool
// registry; EpisodeState.Handle takes the typed value on.
func Check(call toolcall.Call, maxTimeout time.Duration) (Prepared, error) {
	var p Prepared
	if !toolcall.IsTool(call.Tool) && IsForeign(call.Tool) {
		p = PrepareForeign(call.Tool, string(call.Args))
		p.Call.EpisodeID, p.Call.Session, p.Call.RequestID = call.EpisodeID, call.Session, call.RequestID
	} else {
		p = Prepare(call)
	}
	if p.Call.Tool != toolcall.Bash {
		return p, nil
	}
	a, ok := p.args.args.(*toolcall.BashArgs)
	if !ok {
		return p, &toolcall.ArgsError{Field: "args", Problem: `bash takes {"command": "...", "timeout_sec": N}: ` + strings.TrimPrefix(p.args.err.Error(), "json: ")}
	}
	if strings.TrimSpace(a.Command) == "" {
		return p, &toolcall.ArgsError{Field: "args.command", Problem: "missing or empty: give the command to run"}
	}
	if max := maxTimeout.Seconds(); a.TimeoutSec < 0 || a.TimeoutSec > max {
		return p, &toolcall.ArgsError{Field: "args.timeout_sec", Problem: fmt.Sprintf("%v is out of range: give 0 (the episode's per-call timeout) to %v seconds", a.TimeoutSec, max)}
	}
	return p, nil
}
