package hostside

import (
	"context"
	"fmt"
	"maps"
	"regexp"
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

// dumpBash prints what brings a fresh bash session to this one's state:
// exported variables, functions, shopt and set options, all builtins run
// by the session's own shell (no process starts in the sandbox). The
// variables end at dumpVarsEnd; DumpSessions leaves out of them the
// readonly ones and those bash maintains itself. The working directory
// comes from the call's result.
const dumpBash = `{ builtin declare -px; builtin echo '` + dumpVarsEnd + `'; builtin declare -f; builtin shopt -p; builtin set +o; } 2>/dev/null`

// dumpVarsEnd is the line after dumpBash's variables.
const dumpVarsEnd = "#rollcage-dump: end of variables"

// dumpSkip are the variable lines of dumpBash's output a restore leaves out.
var dumpSkip = regexp.MustCompile(`^declare -[^ ]*r|^declare -[^ ]* (PWD|OLDPWD|SHLVL|_)(=|$)`)

// restoreScript is dumpBash's output less its marker and the variable
// lines dumpSkip matches (only before the marker: a function's body is
// kept as it is).
func restoreScript(out string) string {
	vars, rest, found := strings.Cut(out, dumpVarsEnd+"\n")
	if !found {
		vars, rest = out, ""
	}
	var b strings.Builder
	for line := range strings.SplitAfterSeq(vars, "\n") {
		if !dumpSkip.MatchString(strings.TrimSuffix(line, "\n")) {
			b.WriteString(line)
		}
	}
	b.WriteString(rest)
	return b.String()
}

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
		if res.Shell != "sh" {
			script = restoreScript(script)
		}
		if res.Cwd != "" {
			script = cd + " -- " + ShellQuote(res.Cwd) + " 2>/dev/null\n" + script
		}
		scripts[name] = script
	}
	return scripts, nil
}

// ForkDump is what a fork takes from the parent's agent, taken in the
// background while the fork makes its children ready: the sessions'
// restore scripts (DumpSessions) and, listed by background at the same
// time, the processes it does not carry.
type ForkDump struct {
	done       chan struct{}
	scripts    map[string]string
	notCarried []string
	err        error
	endedAt    time.Duration // since the fork's start
}

// StartDump starts the dump of a fork that began at start.
func StartDump(ctx context.Context, start time.Time, exec ExecFunc, sessions []string, background func(context.Context) []string) *ForkDump {
	d := &ForkDump{done: make(chan struct{})}
	go func() {
		defer close(d.done)
		bg := make(chan []string, 1)
		go func() { bg <- background(ctx) }()
		d.scripts, d.err = DumpSessions(ctx, exec, sessions)
		d.notCarried = <-bg
		d.endedAt = time.Since(start)
	}()
	return d
}

// Wait waits for the dump and returns its error.
func (d *ForkDump) Wait() error {
	<-d.done
	return d.err
}

// Result is the dump after Wait returned nil: the scripts, the processes
// not carried and when, into the fork, it ended.
func (d *ForkDump) Result() (scripts map[string]string, notCarried []string, endedAt time.Duration) {
	<-d.done
	return d.scripts, d.notCarried, d.endedAt
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
