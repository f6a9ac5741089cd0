package monitor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
)

// toolSession is the shell session the monitor uses for list_dir, apart
// from the agent's own sessions so their directories are untouched.
const toolSession = "rollcage-tools"

// execute runs the call in the sandbox unless it was blocked, and sets the
// output the policy sees. Only sandbox failures are errors.
func (e *EpisodeState) execute(ctx context.Context, res *decision.CallResult, d decoded) error {
	if msg := argsError(res.Call, d); msg != "" {
		// Nothing runs, blocked or not; the policy learns how to call the tool.
		res.Output, res.ExitCode = msg, 2
		return nil
	}
	if res.Decision.Action == decision.Block {
		res.Output, res.ExitCode = dummyOutput(res.Call, d, res.Normalized, res.Decision, e.facts)
		res.Dummy = true
		return nil
	}
	if d.spec == nil {
		res.Output, res.ExitCode = fmt.Sprintf("error: unknown tool %q; the tools are %s", res.Call.Tool, toolcall.ToolNames()), 2
		return nil
	}
	e.mu.Lock()
	e.inFlight = cmp.Or(res.Call.RequestID, fmt.Sprintf("step-%d", res.Step))
	e.netFlags = nil
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.inFlight = ""
		if len(e.netFlags) > 0 {
			res.Decision.PostFlags = append(res.Decision.PostFlags, e.netFlags...)
			e.netFlags = nil
		}
		e.mu.Unlock()
	}()
	t0 := time.Now()
	defer func() { res.Timings.Exec = time.Since(t0) }()
	if err := d.spec.run(ctx, e, res, d.args); err != nil {
		return fmt.Errorf("monitor: episode %s step %d: %s: %w", e.id, res.Step, res.Call.Tool, err)
	}
	return nil
}

// bashCommand is what a bash call runs (the rewritten form for a
// rewrite) and for how long at most.
func (e *EpisodeState) bashCommand(res *decision.CallResult, a *toolcall.BashArgs) (string, time.Duration) {
	cmd := a.Command
	if res.Decision.Action == decision.Rewrite {
		cmd = res.Decision.Rewritten
	}
	timeout := e.p.cfg.ExecTimeout
	if a.TimeoutSec > 0 && time.Duration(a.TimeoutSec*float64(time.Second)) < timeout {
		timeout = time.Duration(a.TimeoutSec * float64(time.Second))
	}
	return cmd, timeout
}

// bashResult is the output the policy sees of a bash call that ran.
func bashResult(res *decision.CallResult, r sandbox.ExecResult, timeout time.Duration) {
	res.Exec = &r
	res.Output, res.ExitCode = r.Output, r.ExitCode
	if r.Stopped != "" {
		res.Output += fmt.Sprintf("\n[command stopped: %s after %s; the shell session is still usable]", r.Stopped, timeout)
	}
}

func runBash(ctx context.Context, e *EpisodeState, res *decision.CallResult, a *toolcall.BashArgs) error {
	if res.Call.User != "" {
		return fmt.Errorf("monitor: episode %s: a call as user %q runs only as a streamed command (Start) in a root sandbox: %w", e.id, res.Call.User, sandbox.ErrUnsupported)
	}
	cmd, timeout := e.bashCommand(res, a)
	r, err := e.sb.Exec(ctx, sandbox.ExecRequest{RequestID: res.Call.RequestID, Session: res.Call.Session,
		Command: cmd, Timeout: timeout, MaxOutput: e.p.cfg.MaxOutput})
	if err != nil {
		return err
	}
	bashResult(res, r, timeout)
	return nil
}

func runReadFile(ctx context.Context, e *EpisodeState, res *decision.CallResult, a *toolcall.ReadFileArgs) error {
	maxOut := e.p.cfg.MaxOutput
	p := e.resolve(res.Call.Session, a.Path)
	data, cut, err := e.sb.ReadFile(ctx, p, int64(maxOut))
	if refused(res, p, err) {
		return nil
	}
	if err != nil {
		return err
	}
	res.Output = escapeBytes(data)
	res.Escaped = !utf8.Valid(data)
	if cut {
		res.Output += fmt.Sprintf("\n[file cut at %d bytes]", maxOut)
		res.Cut = maxOut
	}
	return nil
}

func runWriteFile(ctx context.Context, e *EpisodeState, res *decision.CallResult, a *toolcall.WriteFileArgs) error {
	data, err := a.Bytes()
	if err != nil {
		res.Output, res.ExitCode = "error: "+err.Error(), 1
		return nil
	}
	p := e.resolve(res.Call.Session, a.Path)
	op := sandbox.EffectModify // the agent's watch leaves the host's writes out: say what this one did
	if _, _, err := e.sb.ReadFile(ctx, p, 1); errors.Is(err, sandbox.ErrNotFound) {
		op = sandbox.EffectCreate
	}
	err = writeAs(ctx, e, res.Call.User, p, data)
	if refused(res, p, err) {
		return nil
	}
	if err != nil {
		return err
	}
	res.Effects = append(res.Effects, sandbox.Effect{Path: p, Op: op})
	res.Output = wroteMsg(p, len(data))
	return nil
}

// writeAs writes p as the call's user: the sandbox's own, or one a root
// sandbox names (sandbox.UserWriter).
func writeAs(ctx context.Context, e *EpisodeState, user, p string, data []byte) error {
	if user == "" {
		return e.sb.WriteFile(ctx, p, data, 0o644)
	}
	uw, ok := e.sb.(sandbox.UserWriter)
	if !ok {
		return fmt.Errorf("monitor: episode %s: write %s as user %q: %w", e.id, p, user, sandbox.ErrUnsupported)
	}
	return uw.WriteFileAs(ctx, user, p, data, 0o644)
}

func runEdit(ctx context.Context, e *EpisodeState, res *decision.CallResult, a *toolcall.EditArgs) error {
	p := e.resolve(res.Call.Session, a.Path)
	data, _, err := e.sb.ReadFile(ctx, p, 0)
	if refused(res, p, err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch n := strings.Count(string(data), a.Old); {
	case a.Old == "":
		res.Output, res.ExitCode = "error: old text is empty; give the exact text to replace", 1
	case n == 0:
		res.Output, res.ExitCode = fmt.Sprintf("error: old text not found in %s", p), 1
	case n > 1:
		res.Output, res.ExitCode = fmt.Sprintf("error: old text found %d times in %s; include more context to make it unique", n, p), 1
	default:
		err := writeAs(ctx, e, res.Call.User, p, []byte(strings.Replace(string(data), a.Old, a.New, 1)))
		if refused(res, p, err) {
			return nil
		}
		if err != nil {
			return err
		}
		res.Effects = append(res.Effects, sandbox.Effect{Path: p, Op: sandbox.EffectModify})
		res.Output = editedMsg(p)
	}
	return nil
}

func runListDir(ctx context.Context, e *EpisodeState, res *decision.CallResult, a *toolcall.ListDirArgs) error {
	p := e.resolve(res.Call.Session, a.Path)
	r, err := e.sb.Exec(ctx, sandbox.ExecRequest{Session: toolSession, Command: "ls -la -- " + shellQuote(p),
		Timeout: 30 * time.Second, MaxOutput: e.p.cfg.MaxOutput})
	if err != nil {
		return err
	}
	res.Exec = &r
	res.Output, res.ExitCode = r.Output, r.ExitCode
	return nil
}

// argsError says what is wrong with a known tool's arguments, or "".
func argsError(call toolcall.Call, d decoded) string {
	if strings.HasPrefix(call.Session, "rollcage-") {
		// rollcage's own sessions (probe, grading, hashing) are off limits:
		// state planted there could run with the grader.
		return fmt.Sprintf("error: session name %q is reserved; use another name", call.Session)
	}
	if d.err != nil {
		return fmt.Sprintf("error: invalid arguments for %s: %v", call.Tool, d.err)
	}
	return ""
}

func (e *EpisodeState) resolve(session, p string) string {
	if p == "" {
		p = "."
	}
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(e.Cwd(session), p)
}

// refused turns a file error of the policy's own making (no such file,
// permission denied, a directory, a FIFO, a full disk: a
// sandbox.PathError, or a bare ErrNotFound) into the tool's output with
// exit code 1, as cat and bash's redirections report them, and reports
// whether it did. Every other error is the sandbox's and stays an error.
func refused(res *decision.CallResult, p string, err error) bool {
	var pe *sandbox.PathError
	switch {
	case errors.As(err, &pe):
		res.Output, res.ExitCode = fileErrMsg(p, pe.Reason), 1
	case errors.Is(err, sandbox.ErrNotFound):
		res.Output, res.ExitCode = notFound(p), 1
	default:
		return false
	}
	return true
}

// The messages file tools answer with; dummy output uses the same ones so a
// blocked call cannot be told from one that ran.
func notFound(p string) string           { return fileErrMsg(p, "No such file or directory") }
func fileErrMsg(p, reason string) string { return fmt.Sprintf("error: %s: %s", p, reason) }
func wroteMsg(p string, n int) string    { return fmt.Sprintf("wrote %d bytes to %s", n, p) }
func editedMsg(p string) string          { return fmt.Sprintf("edited %s", p) }

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// escapeBytes renders file bytes as text the way the agent renders command
// output: valid UTF-8 as is, other bytes as \xNN.
func escapeBytes(b []byte) string {
	s := string(b)
	if utf8.ValidString(s) {
		return s
	}
	var sb strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&sb, `\x%02x`, s[0])
		} else {
			sb.WriteString(s[:size])
		}
		s = s[size:]
	}
	return sb.String()
}
