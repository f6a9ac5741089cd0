package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/e2b/envd/process"
	"github.com/rollcage/rollcage/e2b/envd/process/processconnect"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
)

// proc is one process started through Start: one bash call through the
// monitor, streamed, running on after the stream that started it ends (a
// stream's end never stops it; SendSignal and the sandbox's kill do).
type proc struct {
	pid    uint32 // the real pid in the sandbox; above maxPID when nothing runs (a blocked call)
	tag    string
	user   string
	stdin  bool
	config *process.ProcessConfig
	run    *harness.Running   // nil on the fallback path (a sandbox that does not stream)
	cancel context.CancelFunc // the fallback path's call; the deadline's timer otherwise
	done   chan struct{}      // closed once ended

	signalled atomic.Int32 // the signal SendSignal sent, 0 for none

	mu      sync.Mutex
	events  []*process.ProcessEvent // guarded by mu; data as it came, then end
	dropped int                     // guarded by mu; events dropped from the front (over maxKept)
	kept    int                     // guarded by mu; data bytes in events
	ended   bool                    // guarded by mu
	err     error                   // guarded by mu; a Connect error ending the stream instead of end
	changed chan struct{}           // guarded by mu; closed and replaced on every change
}

// maxPID is Linux's highest pid: the pids of calls that run nothing
// (blocked: their dummy output is the answer) are above it, so they never
// name a real process.
const maxPID = 1 << 22

// maxKept bounds the output a process keeps for its followers; beyond
// it the oldest chunks go (a follower that lags that far misses them).
const maxKept = 16 << 20

func newProc() *proc { return &proc{done: make(chan struct{}), changed: make(chan struct{})} }

// push appends a data event.
func (p *proc) push(o sandbox.Output) {
	data := &process.ProcessEvent_DataEvent{}
	if o.Stream == sandbox.Stderr {
		data.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: o.Data}
	} else {
		data.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: o.Data}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: data}})
	p.kept += len(o.Data)
	for p.kept > maxKept && len(p.events) > 1 {
		p.kept -= dataLen(p.events[0])
		p.events[0] = nil
		p.events = p.events[1:]
		p.dropped++
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

func dataLen(ev *process.ProcessEvent) int {
	d := ev.GetData()
	return len(d.GetStdout()) + len(d.GetStderr())
}

// finish appends the last events (or the error ending the stream).
func (p *proc) finish(evs []*process.ProcessEvent, err error) {
	p.mu.Lock()
	p.events = append(p.events, evs...)
	p.ended, p.err = true, err
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	close(p.done)
}

// since returns the events from index i on (i counts every event ever
// pushed), the index after them, and whether that is the end.
func (p *proc) since(i int) (evs []*process.ProcessEvent, next int, ended bool, changed <-chan struct{}, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i = max(i, p.dropped)
	evs = slices.Clone(p.events[i-p.dropped:])
	return evs, p.dropped + len(p.events), p.ended, p.changed, p.err
}

// signal sends sig to the process's group: a detached (setsid) child
// survives, as it would in E2B.
func (p *proc) signal(ctx context.Context, sig syscall.Signal) error {
	p.signalled.Store(int32(sig))
	if p.run == nil {
		p.cancel()
		return nil
	}
	if sp := p.run.Process(); sp != nil {
		return sp.Signal(ctx, sig)
	}
	return nil
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

// start runs a process's call, streamed: the monitor decides before it
// starts, its output is the process's as it comes, and other processes
// run beside it. The call's lifetime is not the stream's: it ends at the
// request's deadline (Connect-Timeout-Ms) when one was given, on
// SendSignal, or when the sandbox is killed.
func (s *Server) start(ctx context.Context, b *sbx, req *process.StartRequest, cmd, user string) (*proc, error) {
	base, stopDeadline := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		base, stopDeadline = context.WithDeadline(base, deadline)
	}
	tag := req.GetTag()
	b.mu.Lock()
	if b.killed {
		b.mu.Unlock()
		stopDeadline()
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("sandbox %s was killed", b.id))
	}
	if tag != "" {
		if b.tags[tag] {
			b.mu.Unlock()
			stopDeadline()
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("a process tagged %q is running: pick another tag", tag))
		}
		b.tags[tag] = true
	}
	b.nextPID++
	seq := b.nextPID
	b.mu.Unlock()
	pr := newProc()
	pr.tag, pr.user, pr.config, pr.stdin, pr.cancel = tag, user, req.Process, req.GetStdin(), stopDeadline
	release := func() {
		b.mu.Lock()
		delete(b.procs, pr.pid)
		if tag != "" {
			delete(b.tags, tag)
		}
		b.mu.Unlock()
	}

	args := toolcall.BashArgs{Command: cmd}
	if hasDeadline {
		args.TimeoutSec = time.Until(deadline).Seconds()
	}
	raw, err := marshalArgs(args)
	if err != nil {
		release()
		stopDeadline()
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	call := toolcall.Call{Tool: toolcall.Bash, Args: raw, Session: session, RequestID: fmt.Sprintf("e2b-%s-%d", b.id, seq)}
	call.User = b.runAs(user)
	run, err := s.cfg.Episodes.Start(base, b.id, call, pr.stdin, pr.push)
	switch {
	case errors.Is(err, sandbox.ErrUnsupported):
		return s.startCall(base, b, pr, call, seq, release)
	case err != nil:
		release()
		stopDeadline()
		return nil, callError(b, err)
	}
	pr.run = run
	pr.pid = maxPID + seq
	if sp := run.Process(); sp != nil {
		pr.pid = uint32(sp.PID())
	}
	b.mu.Lock()
	b.procs[pr.pid] = pr
	b.mu.Unlock()
	go func() {
		defer stopDeadline()
		res, err := run.Wait(context.WithoutCancel(ctx))
		release()
		b.notify(res.Effects)
		pr.finish(processEnd(base, pr, res, callError(b, err), false))
	}()
	return pr, nil
}

// startCall is start on a sandbox that does not stream: one call whose
// output comes at its end, stdout and stderr interleaved as stdout.
func (s *Server) startCall(base context.Context, b *sbx, pr *proc, call toolcall.Call, seq uint32, release func()) (*proc, error) {
	stopDeadline := pr.cancel
	cctx, cancelCall := context.WithCancel(base)
	pr.cancel = func() { cancelCall(); stopDeadline() }
	pr.pid = maxPID + seq
	b.mu.Lock()
	b.procs[pr.pid] = pr
	b.mu.Unlock()
	go func() {
		defer pr.cancel()
		res, _, err := s.cfg.Episodes.Call(cctx, b.id, call)
		release()
		b.notify(res.Effects)
		pr.finish(processEnd(base, pr, res, callError(b, err), true))
	}()
	return pr, nil
}

// processEnd turns a call's result into the events a stream ends with:
// the output when it did not stream, then end.
func processEnd(ctx context.Context, pr *proc, res decision.CallResult, err error, withOutput bool) ([]*process.ProcessEvent, error) {
	stopped := ""
	if res.Exec != nil {
		stopped = res.Exec.Stopped
	}
	if sig := syscall.Signal(pr.signalled.Load()); sig != 0 && (err != nil || res.ExitCode == 128+int(sig) || res.ExitCode < 0) {
		// Ended by SendSignal: what envd reports for a signalled process.
		return []*process.ProcessEvent{endEvent(-1, false, "signal: "+signalName(sig))}, nil
	}
	deadline, hasDeadline := ctx.Deadline()
	switch {
	case err == nil && stopped == sandbox.StopTimeout && (ctx.Err() != nil || hasDeadline && time.Until(deadline) < time.Second),
		err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, connect.NewError(connect.CodeDeadlineExceeded, errors.New("the command ran past its timeout and was killed"))
	case err == nil && stopped == sandbox.StopTimeout:
		// The monitor's own bound, shorter than what the request allowed:
		// say so rather than end it as if it exited.
		return nil, connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("the command ran past rollcage's exec timeout (%s, the most one process runs, whatever its timeoutMs) and was killed: start it in the background (setsid … &) and poll for its result", res.Exec.Duration.Round(time.Second)))
	case err != nil:
		var ce *connect.Error
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	var evs []*process.ProcessEvent
	if withOutput && res.Output != "" {
		evs = append(evs, &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{
			Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: []byte(res.Output)}}}})
	}
	return append(evs, endEvent(int32(res.ExitCode), true, fmt.Sprintf("exit status %d", res.ExitCode))), nil
}

// signalName is Go's name of a signal, as envd's status shows it.
func signalName(sig syscall.Signal) string {
	if sig == syscall.SIGKILL {
		return "killed"
	}
	return sig.String()
}

func endEvent(code int32, exited bool, status string) *process.ProcessEvent {
	end := &process.ProcessEvent_EndEvent{ExitCode: code, Exited: exited, Status: status}
	if code != 0 {
		end.Error = &status
	}
	return &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}
}

// follow streams a process: start first, then every event it kept from
// the beginning (a stream cut by a gateway loses nothing on reconnect),
// keepalives while it runs, its end last. The stream's end leaves the
// process running.
func (s *Server) follow(ctx context.Context, pr *proc, send func(*process.ProcessEvent) error) error {
	if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: pr.pid}}}); err != nil {
		return err
	}
	t := time.NewTicker(s.cfg.Keepalive)
	defer t.Stop()
	next := 0
	for {
		evs, n, ended, changed, err := pr.since(next)
		next = n
		for _, ev := range evs {
			if err := send(ev); err != nil {
				return err
			}
		}
		if ended {
			return err
		}
		select {
		case <-changed:
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

// SendSignal sends SIGTERM or SIGKILL to the process's group. A process
// it detached (setsid) survives, as it would in E2B.
func (p *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	var sig syscall.Signal
	switch req.Msg.Signal {
	case process.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case process.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %v: send SIGNAL_SIGTERM or SIGNAL_SIGKILL", req.Msg.Signal))
	}
	b := sandboxOf(ctx)
	pr, err := b.find(req.Msg.Process)
	if err != nil {
		return nil, err
	}
	if err := pr.signal(ctx, sig); err != nil {
		return nil, processError(b, err)
	}
	if sig == syscall.SIGKILL {
		select {
		case <-pr.done:
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
		}
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

// processError maps a failed input or signal to a Connect code.
func processError(b *sbx, err error) error {
	switch {
	case errors.Is(err, decision.ErrInputRefused):
		return connect.NewError(connect.CodePermissionDenied, err)
	case errors.Is(err, sandbox.ErrClosed):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("sandbox %s was killed: %w", b.id, err))
	case errors.Is(err, sandbox.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, errors.New("the process ended"))
	}
	return connect.NewError(connect.CodeInternal, err)
}

// streamed returns the running process a selector names that takes
// input: started with stdin, through a sandbox that streams.
func (b *sbx) streamed(sel *process.ProcessSelector) (*proc, error) {
	pr, err := b.find(sel)
	if err != nil {
		return nil, err
	}
	switch {
	case pr.run == nil:
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this sandbox's backend streams no processes, so they take no input after start: pass it in the command, e.g. with a heredoc"))
	case !pr.stdin:
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d was started without stdin: start it with stdin: true to send input", pr.pid))
	case pr.run.Process() == nil:
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d did not run (its call was blocked)", pr.pid))
	}
	return pr, nil
}

func (p *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	b := sandboxOf(ctx)
	pr, err := b.find(req.Msg.Process)
	if err != nil {
		return nil, err
	}
	if pr.run == nil || !pr.stdin || pr.run.Process() == nil {
		// Its stdin was closed from the start.
		return connect.NewResponse(&process.CloseStdinResponse{}), nil
	}
	if err := pr.run.Process().CloseInput(ctx); err != nil {
		return nil, processError(b, err)
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// input writes one ProcessInput to pr, through the monitor's rules.
func input(ctx context.Context, b *sbx, pr *proc, in *process.ProcessInput) error {
	if in.GetPty() != nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("rollcage runs no PTYs: send stdin"))
	}
	if len(in.GetStdin()) == 0 {
		return nil
	}
	if err := pr.run.Input(ctx, in.GetStdin()); err != nil {
		return processError(b, err)
	}
	return nil
}

// SendInput writes to a process's stdin. The input passes the monitor's
// rules as a command typed into it would: what they would block is not
// written (permission_denied) and labels the process's call.
func (p *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	b := sandboxOf(ctx)
	pr, err := b.streamed(req.Msg.Process)
	if err != nil {
		return nil, err
	}
	if err := input(ctx, b, pr, req.Msg.Input); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

// StreamInput is SendInput as a client stream: a start naming the
// process, then data.
func (p *processService) StreamInput(ctx context.Context, st *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	b := sandboxOf(ctx)
	var pr *proc
	for st.Receive() {
		switch ev := st.Msg(); {
		case ev.GetStart() != nil:
			var err error
			if pr, err = b.streamed(ev.GetStart().GetProcess()); err != nil {
				return nil, err
			}
		case ev.GetData() != nil:
			if pr == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("stream input: send a start naming the process before data"))
			}
			if err := input(ctx, b, pr, ev.GetData().GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

func (p *processService) Update(context.Context, *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("rollcage runs no PTYs, so there is none to resize"))
}
