package hostside

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// Bounds of a fork's session steps.
const (
	DumpTimeout = 10 * time.Second
	dumpMax     = 4 << 20 // a session's dumped state, bytes
)

// dumpBash prints a script that brings a fresh bash session to this one's
// state: exported variables (readonly ones and those bash maintains
// itself left out), functions, shopt and set options. The working
// directory comes from the call's result.
const dumpBash = `{ builtin declare -px | grep -Ev '^declare -[^ ]*r|^declare -[^ ]* (PWD|OLDPWD|SHLVL|_)(=|$)'; builtin declare -f; builtin shopt -p; builtin set +o; } 2>/dev/null`

// dumpSh is dumpBash for sh sessions: variables only.
const dumpSh = `export -p 2>/dev/null`

// ExecFunc runs one call in a sandbox's agent.
type ExecFunc func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error)

// HostSession reports whether a session name is rollcage's own (the disk
// watchdog, set-up), which a fork does not carry.
func HostSession(name string) bool { return strings.HasPrefix(name, "rollcage-") }

// DumpSessions returns, per session, the script that restores its state.
func DumpSessions(ctx context.Context, exec ExecFunc, sessions []string) (map[string]string, error) {
	scripts := make(map[string]string, len(sessions))
	for _, name := range sessions {
		req := sandbox.ExecRequest{Session: name, Command: dumpBash, Timeout: DumpTimeout, MaxOutput: dumpMax}
		res, err := exec(ctx, req)
		if err == nil && res.Shell == "sh" {
			req.Command = dumpSh
			res, err = exec(ctx, req)
		}
		if err != nil {
			return nil, fmt.Errorf("dump session %q: %w", name, err)
		}
		if res.Truncated || res.Stopped != sandbox.StopNone {
			return nil, fmt.Errorf("dump session %q: its state is over %d bytes or did not finish (%s): unset large variables before forking", name, dumpMax, res.Stopped)
		}
		cd := "cd"
		if res.Shell != "sh" {
			cd = "builtin cd"
		}
		script := res.Output
		if res.Cwd != "" {
			script = cd + " -- " + ShellQuote(res.Cwd) + " 2>/dev/null\n" + script
		}
		scripts[name] = script
	}
	return scripts, nil
}

// RestoreSessions replays DumpSessions' scripts into a fresh sandbox,
// calling done with each session restored.
func RestoreSessions(ctx context.Context, exec ExecFunc, scripts map[string]string, done func(session string)) error {
	for _, name := range slices.Sorted(maps.Keys(scripts)) {
		res, err := exec(ctx, sandbox.ExecRequest{Session: name, Command: scripts[name], Timeout: DumpTimeout})
		if err != nil {
			return fmt.Errorf("restore session %q: %w", name, err)
		}
		if res.Stopped != sandbox.StopNone {
			return fmt.Errorf("restore session %q: stopped (%s)", name, res.Stopped)
		}
		done(name)
	}
	return nil
}

// ShellQuote quotes s for any POSIX shell.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
