package monitor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
)

// PostTimeout bounds the checks after a streamed call ended (reading
// back the files it wrote, the judge on suspicious effects).
const PostTimeout = 2 * time.Minute

// Running is a bash call Start let through (or blocked): the decision
// was made before anything ran; the effects and output checks follow its
// end, whoever waits for it.
type Running struct {
	e   *EpisodeState
	res decision.CallResult // final once done is closed
	// decided and step are the decision before the start.
	decided decision.Decision
	step    int
	proc    sandbox.Process
	call    toolcall.Call // the bash call, for checking input

	inMu    sync.Mutex
	inFlags []rules.Flag // guarded by inMu; certain flags of input refused

	done chan struct{}
	err  error // set before done is closed
}

// Decision is the call's decision, made before it started.
func (r *Running) Decision() decision.Decision { return r.decided }

// Step is the call's step in the episode.
func (r *Running) Step() int { return r.step }

// Process is the running command, for input and signals; nil when
// nothing runs (a blocked call, bad arguments).
func (r *Running) Process() sandbox.Process { return r.proc }

// Done is closed once the call ended and was checked.
func (r *Running) Done() <-chan struct{} { return r.done }

// Wait returns the call's CallResult once it ended and was checked, as
// Handle would have: Output is the recorded (capped, checked) output.
// The error is a sandbox failure. Cancelling ctx stops waiting only.
func (r *Running) Wait(ctx context.Context) (decision.CallResult, error) {
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		return decision.CallResult{}, fmt.Errorf("monitor: episode %s step %d: wait: %w", r.e.id, r.step, ctx.Err())
	}
}

// Start takes a bash call through normalize → rules → judge → decide like
// Handle and, unless it is blocked, starts it in the sandbox's Streamer
// and returns while it runs; other calls may run meanwhile. A blocked
// call's dummy output goes to out at once and the call is done. The
// streamed output is checked line by line before out sees it: a line of
// the protected material (hidden tests, the upstream fix, a later
// commit's id) that the policy did not type or write itself is withheld,
// and a partial line waits up to 200 ms for its end. The recorded output
// gets Handle's whole-output check at the end. Egress denials while it
// runs are not attributed to it. Only bash streams; a sandbox that is no
// sandbox.Streamer gets an error wrapping sandbox.ErrUnsupported.
//
// stdin keeps the command's stdin open (Running.Process().Input). out
// receives the output as it comes, stdout and stderr apart, each line
// checked first; it must not block, and nil discards the output. A
// blocked call's dummy output comes to out as one stdout chunk.
func (e *EpisodeState) Start(ctx context.Context, call toolcall.Call, stdin bool, out func(sandbox.Output)) (*Running, error) {
	st, ok := e.sb.(sandbox.Streamer)
	if !ok || call.Tool != toolcall.Bash {
		return nil, fmt.Errorf("monitor: episode %s: start %s: only bash on a streaming sandbox starts: %w", e.id, call.Tool, sandbox.ErrUnsupported)
	}
	if out == nil {
		out = func(sandbox.Output) {}
	}
	e.callMu.Lock()
	defer e.callMu.Unlock()
	start := time.Now()
	res, args, err := e.decideCall(ctx, Prepare(call))
	if err != nil {
		return nil, err
	}
	r := &Running{e: e, res: res, decided: res.Decision, step: res.Step, call: call, done: make(chan struct{})}
	if argsError(call, args) != "" || res.Decision.Action == decision.Block {
		// Nothing runs: answer now, as Handle does (execute runs nothing
		// for bad arguments or a block).
		if err := e.execute(ctx, &r.res, args); err != nil {
			return nil, err
		}
		e.post(ctx, &r.res, start)
		if r.res.Output != "" {
			out(sandbox.Output{Stream: sandbox.Stdout, Data: []byte(r.res.Output)})
		}
		close(r.done)
		return r, nil
	}
	a := args.args.(*toolcall.BashArgs)
	cmd, timeout := e.bashCommand(&res, a)
	f := &lineFilter{e: e, typed: res.Normalized.Raw, out: out}
	t0 := time.Now()
	p, err := st.Start(ctx, sandbox.StartRequest{Command: cmd, Timeout: timeout, MaxOutput: e.p.cfg.MaxOutput, Stdin: stdin}, f.write)
	if err != nil {
		return nil, fmt.Errorf("monitor: episode %s step %d: start: %w", e.id, res.Step, err)
	}
	r.proc = p
	pctx := context.WithoutCancel(ctx)
	go func() {
		defer close(r.done)
		xr, err := p.Wait(pctx)
		f.flush()
		cctx, cancel := context.WithTimeout(pctx, PostTimeout)
		defer cancel()
		e.callMu.Lock()
		defer e.callMu.Unlock()
		r.res.Timings.Exec = time.Since(t0)
		if err != nil {
			r.err = fmt.Errorf("monitor: episode %s step %d: bash: %w", e.id, res.Step, err)
			return
		}
		bashResult(&r.res, xr, timeout)
		r.inMu.Lock()
		r.res.Decision.PostFlags = append(r.res.Decision.PostFlags, r.inFlags...)
		r.inMu.Unlock()
		e.post(cctx, &r.res, start)
	}()
	return r, nil
}

// Input writes data to the command's stdin once the rules had it: it
// could be commands to a shell the call started, so it is checked as a
// bash command of the call's session would be. Input with a certain flag
// is not written: the error wraps decision.ErrInputRefused and says why, and the
// call is labelled with the flag when it ends. Suspicious flags let it
// through (the output and effects checks still follow).
func (r *Running) Input(ctx context.Context, data []byte) error {
	if r.proc == nil {
		return fmt.Errorf("monitor: episode %s step %d: input: nothing runs", r.e.id, r.step)
	}
	e := r.e
	call := toolcall.Call{Tool: toolcall.Bash, Session: r.call.Session, EpisodeID: e.id}
	call.Args, _ = json.Marshal(toolcall.BashArgs{Command: string(data)})
	e.callMu.Lock()
	n, internal := normalizeCall(call, decodeCall(call), e.Cwd(call.Session), &e.files)
	flags, err := e.evalRules(ctx, call, n)
	e.callMu.Unlock()
	if err != nil {
		return fmt.Errorf("monitor: episode %s step %d: input: rules: %w", e.id, r.step, err)
	}
	for _, msg := range internal {
		flags = append(flags, internalErrorFlag(msg))
	}
	var certain []rules.Flag
	for _, f := range flags {
		if f.Severity == rules.Certain {
			certain = append(certain, f)
		}
	}
	if len(certain) > 0 {
		certain = sortFlags(certain)
		r.inMu.Lock()
		r.inFlags = append(r.inFlags, certain...)
		r.inMu.Unlock()
		return fmt.Errorf("monitor: episode %s step %d: %s (%s): %w", e.id, r.step, certain[0].Reason, certain[0].Rule, decision.ErrInputRefused)
	}
	return r.proc.Input(ctx, data)
}

// partialWait is how long a partial line waits for its end before it is
// checked and sent as it is (a prompt that asks for input).
const partialWait = 200 * time.Millisecond

// lineFilter checks streamed output a line at a time before passing it
// on. Chunks come from one goroutine; the partial-line timer is another.
type lineFilter struct {
	e     *EpisodeState
	typed string // the call's own command: its lines are the policy's
	out   func(sandbox.Output)

	mu      sync.Mutex
	partial map[string][]byte      // guarded by mu; per stream, the line begun
	timer   map[string]*time.Timer // guarded by mu
}

func (f *lineFilter) write(o sandbox.Output) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.partial == nil {
		f.partial, f.timer = map[string][]byte{}, map[string]*time.Timer{}
	}
	buf := append(f.partial[o.Stream], o.Data...)
	end := bytes.LastIndexByte(buf, '\n') + 1
	if end > 0 {
		f.send(o.Stream, buf[:end])
	}
	rest := append([]byte(nil), buf[end:]...)
	f.partial[o.Stream] = rest
	if t := f.timer[o.Stream]; t != nil {
		t.Stop()
		delete(f.timer, o.Stream)
	}
	if len(rest) > 0 {
		stream := o.Stream
		f.timer[stream] = time.AfterFunc(partialWait, func() { f.flushStream(stream) })
	}
}

func (f *lineFilter) flushStream(stream string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rest := f.partial[stream]; len(rest) > 0 {
		f.send(stream, rest)
		f.partial[stream] = nil
	}
}

// flush sends what is left once the process ended.
func (f *lineFilter) flush() {
	f.mu.Lock()
	streams := make([]string, 0, len(f.partial))
	for s, t := range f.timer {
		t.Stop()
		streams = append(streams, s)
	}
	for s := range f.partial {
		streams = append(streams, s)
	}
	f.mu.Unlock()
	for _, s := range streams {
		f.flushStream(s)
	}
}

// send passes b on without its protected lines. The caller holds mu.
func (f *lineFilter) send(stream string, b []byte) {
	d := f.e.leaks
	if len(d.lines) == 0 && len(d.prefixes) == 0 {
		f.out(sandbox.Output{Stream: stream, Data: b})
		return
	}
	var kept []byte
	f.e.ownMu.RLock()
	for rest := b; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n') + 1
		if i == 0 {
			i = len(rest)
		}
		line := rest[:i]
		rest = rest[i:]
		if !f.protected(strings.TrimSuffix(string(line), "\n")) {
			kept = append(kept, line...)
		}
	}
	f.e.ownMu.RUnlock()
	if len(kept) > 0 {
		f.out(sandbox.Output{Stream: stream, Data: kept})
	}
}

// protected reports a line the whole-output check could withhold. The
// caller holds ownMu for reading.
func (f *lineFilter) protected(l string) bool {
	d := f.e.leaks
	if d.commitIn(l) != "" {
		return true
	}
	t := normLine(l)
	if _, ok := d.lines[t]; !ok {
		return false
	}
	return !f.e.written[t] && !f.e.fileLines[t] && !strings.Contains(f.typed, t)
}
