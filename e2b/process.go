package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/rollcage/rollcage/e2b/envd/process"
	"github.com/rollcage/rollcage/e2b/envd/process/processconnect"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox"
)

// proc is one process started through Start: one bash call through the
// monitor, running on after the stream that started it ends (a stream's
// end never cancels it; SendSignal and the sandbox's kill do).
type proc struct {
	pid    uint32
	tag    string
	user   string
	config *process.ProcessConfig
	cancel context.CancelFunc
	done   chan struct{}
	// Set before done is closed.
	events []*process.ProcessEvent // data, then end
	err    error                   // a Connect error ending the stream instead of end
}

type processService struct {
	processconnect.UnimplementedProcessHandler
	s *Server
}

var _ processconnect.ProcessHandler = (*processService)(nil)

func marshalArgs(v any) (json.RawMessage, error) { return json.Marshal(v) }

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// commandOf is the bash command a ProcessConfig asks for, as the monitor
// sees it: the SDKs' /bin/bash -l -c CMD is CMD itself; cwd and envs
// (the sandbox's, then the process's) are set in a subshell around it, so
// they and an exit in CMD stay in that process.
func commandOf(c *process.ProcessConfig, sandboxEnvs map[string]string) (string, error) {
	if c == nil || c.Cmd == "" {
		return "", errors.New("process.cmd is empty: give the command to run")
	}
	var cmd string
	switch args := c.Args; {
	case (c.Cmd == "/bin/bash" || c.Cmd == "bash" || c.Cmd == "/bin/sh" || c.Cmd == "sh") &&
		len(args) >= 2 && args[len(args)-2] == "-c" && !slices.ContainsFunc(args[:len(args)-2], func(a string) bool { return !strings.HasPrefix(a, "-") }):
		cmd = args[len(args)-1]
	default:
		parts := []string{shellQuote(c.Cmd)}
		for _, a := range args {
			parts = append(parts, shellQuote(a))
		}
		cmd = strings.Join(parts, " ")
	}
	envs := maps.Clone(sandboxEnvs)
	if envs == nil {
		envs = map[string]string{}
	}
	maps.Copy(envs, c.Envs)
	if c.GetCwd() == "" && len(envs) == 0 {
		return "(\n" + cmd + "\n)", nil
	}
	var b strings.Builder
	b.WriteString("(\n")
	if cwd := c.GetCwd(); cwd != "" {
		fmt.Fprintf(&b, "cd %s || exit 1\n", shellQuote(cwd))
	}
	for _, k := range slices.Sorted(maps.Keys(envs)) {
		if !validEnvName(k) {
			return "", fmt.Errorf("process.envs: %q is not a variable name: use letters, digits and _", k)
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(envs[k]))
	}
	b.WriteString(cmd)
	b.WriteString("\n)")
	return b.String(), nil
}

func validEnvName(k string) bool {
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func (p *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	b := sandboxOf(ctx)
	if req.Msg.Pty != nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("rollcage runs no PTYs: run the command without pty"))
	}
	cmd, err := commandOf(req.Msg.Process, b.envs)
	if err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	pr, err := p.s.start(ctx, b, req.Msg, cmd, userOf(req.Header()))
	if err != nil {
		return err
	}
	return p.s.follow(ctx, pr, func(ev *process.ProcessEvent) error { return stream.Send(&process.StartResponse{Event: ev}) })
}

// start registers a process and runs its call. The call's context is
// not the stream's: it ends at the request's deadline (Connect-Timeout-Ms)
// when one was given, on SendSignal, or when the sandbox is killed.
func (s *Server) start(ctx context.Context, b *sbx, req *process.StartRequest, cmd, user string) (*proc, error) {
	base, stopDeadline := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		base, stopDeadline = context.WithDeadline(base, deadline)
	}
	cctx, cancelCause := context.WithCancelCause(base)
	cancel := func() { cancelCause(errSignalled); stopDeadline() }
	b.mu.Lock()
	if b.killed {
		b.mu.Unlock()
		cancel()
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("sandbox %s was killed", b.id))
	}
	if tag := req.GetTag(); tag != "" {
		for _, o := range b.procs {
			if o.tag == tag {
				b.mu.Unlock()
				cancel()
				return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("a process tagged %q is running (pid %d): pick another tag", tag, o.pid))
			}
		}
	}
	b.nextPID++
	pr := &proc{pid: b.nextPID, tag: req.GetTag(), user: user, config: req.Process, cancel: cancel, done: make(chan struct{})}
	b.procs[pr.pid] = pr
	b.mu.Unlock()

	args := monitor.BashArgs{Command: cmd}
	if hasDeadline {
		args.TimeoutSec = time.Until(deadline).Seconds()
	}
	go func() {
		defer stopDeadline()
		defer cancelCause(nil)
		res, err := s.call(cctx, b, monitor.ToolBash, args, fmt.Sprintf("e2b-%s-%d", b.id, pr.pid))
		pr.events, pr.err = processEnd(cctx, res, err)
		b.mu.Lock()
		delete(b.procs, pr.pid)
		b.mu.Unlock()
		close(pr.done)
	}()
	return pr, nil
}

// processEnd turns a call's result into the events a stream ends with:
// the output (stdout and stderr interleaved, as stdout), then end.
func processEnd(ctx context.Context, res monitor.Result, err error) ([]*process.ProcessEvent, error) {
	stopped := ""
	if res.Exec != nil {
		stopped = res.Exec.Stopped
	}
	switch {
	case errors.Is(context.Cause(ctx), errSignalled):
		// Killed by SendSignal: what envd reports for a killed process.
		return []*process.ProcessEvent{endEvent(-1, false, "signal: killed")}, nil
	case err == nil && stopped == sandbox.StopTimeout && ctx.Err() != nil,
		err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, connect.NewError(connect.CodeDeadlineExceeded, errors.New("the command ran past its timeout and was killed"))
	case err != nil:
		return nil, err
	}
	var evs []*process.ProcessEvent
	if res.Output != "" {
		evs = append(evs, &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{
			Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: []byte(res.Output)}}}})
	}
	return append(evs, endEvent(int32(res.ExitCode), true, fmt.Sprintf("exit status %d", res.ExitCode))), nil
}

var errSignalled = errors.New("e2b: process signalled")

func endEvent(code int32, exited bool, status string) *process.ProcessEvent {
	end := &process.ProcessEvent_EndEvent{ExitCode: code, Exited: exited, Status: status}
	if code != 0 {
		end.Error = &status
	}
	return &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}
}

// follow streams a process: start first, keepalives while it runs, then
// its output and end. The stream's end leaves the process running.
func (s *Server) follow(ctx context.Context, pr *proc, send func(*process.ProcessEvent) error) error {
	if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: pr.pid}}}); err != nil {
		return err
	}
	t := time.NewTicker(s.cfg.Keepalive)
	defer t.Stop()
	for {
		select {
		case <-pr.done:
			for _, ev := range pr.events {
				if err := send(ev); err != nil {
					return err
				}
			}
			return pr.err
		case <-t.C:
			if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("stream of pid %d ended (the process runs on: connect to it again)", pr.pid))
		}
	}
}

// find returns the running process a selector names.
func (b *sbx) find(sel *process.ProcessSelector) (*proc, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case sel == nil:
	case sel.GetTag() != "":
		for _, p := range b.procs {
			if p.tag == sel.GetTag() {
				return p, nil
			}
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no running process tagged %q", sel.GetTag()))
	default:
		if p := b.procs[sel.GetPid()]; p != nil {
			return p, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no running process with pid %d", sel.GetPid()))
	}
	return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process: give a pid or a tag"))
}

func (p *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	pr, err := sandboxOf(ctx).find(req.Msg.Process)
	if err != nil {
		return err
	}
	return p.s.follow(ctx, pr, func(ev *process.ProcessEvent) error { return stream.Send(&process.ConnectResponse{Event: ev}) })
}

func (p *processService) List(ctx context.Context, _ *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	b := sandboxOf(ctx)
	b.mu.Lock()
	out := &process.ListResponse{}
	for _, pid := range slices.Sorted(maps.Keys(b.procs)) {
		pr := b.procs[pid]
		info := &process.ProcessInfo{Config: pr.config, Pid: pid}
		if pr.tag != "" {
			info.Tag = &pr.tag
		}
		out.Processes = append(out.Processes, info)
	}
	b.mu.Unlock()
	return connect.NewResponse(out), nil
}

// SendSignal kills the process (SIGTERM and SIGKILL alike: the agent
// kills the call's process group). A process it detached (setsid)
// survives, as it would in E2B.
func (p *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	switch req.Msg.Signal {
	case process.Signal_SIGNAL_SIGKILL, process.Signal_SIGNAL_SIGTERM:
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %v: send SIGNAL_SIGTERM or SIGNAL_SIGKILL", req.Msg.Signal))
	}
	pr, err := sandboxOf(ctx).find(req.Msg.Process)
	if err != nil {
		return nil, err
	}
	pr.cancel()
	// A running call dies at once; one still queued behind another of the
	// sandbox's calls ends when its turn comes, so do not wait for that.
	select {
	case <-pr.done:
	case <-time.After(5 * time.Second):
	case <-ctx.Done():
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

// CloseStdin: a process's stdin is closed from its start (input after
// start is not supported), so this succeeds for any running process.
func (p *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	if _, err := sandboxOf(ctx).find(req.Msg.Process); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

var errNoInput = errors.New("rollcage takes no input after a process started (each command is one monitored call): pass it in the command, e.g. with a heredoc")

func (p *processService) SendInput(context.Context, *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNoInput)
}

func (p *processService) StreamInput(context.Context, *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNoInput)
}

func (p *processService) Update(context.Context, *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("rollcage runs no PTYs, so there is none to resize"))
}
