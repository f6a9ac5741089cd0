package toolcall

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// testDecodeHook, when set by a test, runs at each decode of a call's
// arguments (a tool's and a foreign call's).
var testDecodeHook func(tool string)

// Prepared is a call with its arguments decoded by its tool, once
// (Prepare, or Check for a call from outside the built-in loop): the
// monitor's stages and the normalizer read the typed value instead of
// decoding the JSON again.
type Prepared struct {
	Call Call
	// Step is the call's step in the episode, numbered by the harness
	// before it hands the call to the monitor (which numbers none).
	Step int

	decoded bool // args and err hold the decoded arguments
	// args are the typed arguments, set when they were read: with err
	// nil, or err naming an unknown field (the call does not run, but the
	// rules see what it asked for). Nil for a generic tool.
	args any
	err  error // what is wrong with the arguments (strict decoding)
}

// decode decodes the call's arguments by its tool, strictly.
func decode(call Call) Prepared {
	p := Prepared{Call: call, decoded: true}
	a := NewArgs(call.Tool)
	if a == nil {
		return p // a generic tool: plain JSON
	}
	if testDecodeHook != nil {
		testDecodeHook(call.Tool)
	}
	read, err := DecodeArgs(call.Args, a)
	if read {
		p.args = a
	}
	p.err = err
	return p
}

// Prepare decodes the call's arguments by its tool.
func Prepare(call Call) Prepared { return decode(call) }

// Args are the call's arguments decoded by its tool: typed (a *BashArgs
// for bash, ...), or nil when they could not be read or the tool is
// generic; err is what is wrong with them. Arguments the call was built
// with (PrepareArgs, PrepareForeign, PrepareEditor) are not decoded
// again; a Prepared made by hand (Call alone) is decoded here.
func (p Prepared) Args() (args any, err error) {
	if !p.decoded {
		p = decode(p.Call)
	}
	return p.args, p.err
}

// PrepareArgs is a call of tool with the arguments built for it (a
// BashArgs for bash, and so on), encoded for the record and kept typed:
// the normalizer and the monitor read them without decoding the JSON
// again. Arguments of another type than the tool's are decoded from
// their JSON, as Prepare does.
func PrepareArgs[A any](tool string, args A) Prepared {
	if a := NewArgs(tool); a != nil && reflect.TypeOf(a) == reflect.TypeFor[*A]() {
		return typedCall(tool, &args)
	}
	b, _ := json.Marshal(args)
	return Prepare(Call{Tool: tool, Args: b})
}

// typedCall is a call of one of rollcage's tools with the arguments built
// for it (a pointer to its argument type), encoded for the record.
func typedCall(tool string, args any) Prepared {
	b, _ := json.Marshal(args)
	return Prepared{Call: Call{Tool: tool, Args: b}, decoded: true, args: args}
}

// Check prepares a call that comes from outside rollcage's own loop (the
// gateway's /calls and MCP): a foreign tool name (OpenHands' execute_bash
// and str_replace_editor, SWE-agent's, ...) is mapped onto rollcage's
// tools (FromForeign, the mapping the audit reads trajectories with), and
// a bash call whose arguments cannot run (not an object, no command, a
// timeout_sec outside 0 to maxTimeout) is an *ArgsError. Other calls pass
// as they are: what is wrong with them is the policy's to see, as an
// error output. The arguments are decoded here, once.
func Check(call Call, maxTimeout time.Duration) (Prepared, error) {
	var p Prepared
	if !IsTool(call.Tool) && IsForeign(call.Tool) {
		p = PrepareForeign(call.Tool, string(call.Args))
		p.Call.EpisodeID, p.Call.Session, p.Call.RequestID = call.EpisodeID, call.Session, call.RequestID
	} else {
		p = Prepare(call)
	}
	if p.Call.Tool != Bash {
		return p, nil
	}
	a, ok := p.args.(*BashArgs)
	if !ok {
		return p, &ArgsError{Field: "args", Problem: `bash takes {"command": "...", "timeout_sec": N}: ` + strings.TrimPrefix(p.err.Error(), "json: ")}
	}
	if strings.TrimSpace(a.Command) == "" {
		return p, &ArgsError{Field: "args.command", Problem: "missing or empty: give the command to run"}
	}
	if max := maxTimeout.Seconds(); a.TimeoutSec < 0 || a.TimeoutSec > max {
		return p, &ArgsError{Field: "args.timeout_sec", Problem: fmt.Sprintf("%v is out of range: give 0 (the episode's per-call timeout) to %v seconds", a.TimeoutSec, max)}
	}
	return p, nil
}
