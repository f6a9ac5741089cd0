package monitor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
)

// PostTimeout bounds the checks after a streamed call ended (reading
// back the files it wrote, the judge on suspicious effects).
const PostTimeout = 2 * time.Minute

// StreamedCall is a bash call Start let through (or blocked): the decision
// was made before anything ran. Once the command exited (Exited), its
// caller runs the check stage (Check), serialized with the episode's
// other calls as Handle is.
type StreamedCall struct {
	e   *EpisodeState
	res decision.CallResult // the decision; Check completes it
	// decided is the decision before the start.
	decided decision.Decision
	proc    sandbox.Process
	filter  *lineFilter
	call    toolcall.Call // the bash call, for checking input
	start   time.Time     // when Start began, for Timings.Total
	timeout time.Duration

	inMu    sync.Mutex
	inFlags []rules.Flag // guarded by inMu; certain flags of input refused

	exited chan struct{}
	// Set before exited is closed: the command's result, its error, how
	// long it ran.
	xr   sandbox.ExecResult
	err  error
	took time.Duration

	checked bool // Check ran, or nothing ran and res is final
}

// Decision is the call's decision, made before it started.
func (r *StreamedCall) Decision() decision.Decision { return r.decided }

// Step is the call's step in the episode.
func (r *StreamedCall) Step() int { return r.res.Step }

// Process is the running command, for input and signals; nil when
// nothing runs (a blocked call, bad arguments).
func (r *StreamedCall) Process() sandbox.Process { return r.proc }

// Exited is closed once the command ended and its output was passed on
// (at once for a call that runs nothing).
func (r *StreamedCall) Exited() <-chan struct{} { return r.exited }

// Withheld reports, once the command exited, that the stream held back
// output: lines of the protected material, or for a read_file the rest
// of the file from the first such line on. What out received is then not
// all the command wrote.
func (r *StreamedCall) Withheld() bool {
	<-r.exited
	if r.filter == nil {
		return false
	}
	r.filter.mu.Lock()
	defer r.filter.mu.Unlock()
	return r.filter.held
}

// Check is the check stage of the call once it exited, as Handle runs it
// after execution: the effects and the whole-output check. It returns the
// call's CallResult (Output is the recorded, capped and checked output)
// and, for a sandbox failure, an error. It waits for Exited; the caller
// serializes it with the episode's other calls. Once it answered, it
// answers the same again.
func (r *StreamedCall) Check(ctx context.Context) (decision.CallResult, error) {
	<-r.exited
	if r.checked {
		return r.res, r.err
	}
	r.checked = true
	e := r.e
	r.res.Timings.Exec = r.took
	if r.err != nil {
		r.err = fmt.Errorf("monitor: episode %s step %d: bash: %w", e.id, r.res.Step, r.err)
		return r.res, r.err
	}
	bashResult(&r.res, r.xr, r.timeout)
	if f := r.filter; f != nil && f.whole && r.Withheld() {
		// The reader got the file up to a protected line, then an error:
		// the whole-output check gets that line, which the record's capped
		// output may not hold.
		r.res.Output += "\n[read stopped at a line of the protected material: the rest of the file was not sent]"
		f.mu.Lock()
		held := strings.Join(f.lines, "\n")
		f.mu.Unlock()
		_, flags := e.leaks.check(held, func(string) bool { return false })
		r.res.Decision.PostFlags = append(r.res.Decision.PostFlags, flags...)
	}
	r.inMu.Lock()
	r.res.Decision.PostFlags = append(r.res.Decision.PostFlags, r.inFlags...)
	r.inMu.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PostTimeout)
	defer cancel()
	e.post(cctx, &r.res, r.start)
	return r.res, nil
}

// Start is Handle for a bash call whose output streams as it comes: the
// decide stage runs on the call (numbered p.Step by the caller) and,
// unless it is blocked, the command starts in the sandbox's Streamer and
// Start returns while it runs; other calls may run meanwhile. A blocked
// call's dummy output goes to out at once and the call is checked at
// once. The streamed output is checked line by line before out sees it:
// a line of the protected material (hidden tests, the upstream fix, a
// later commit's id) that the policy did not type or write itself is
// withheld, and a partial line waits up to 200 ms for its end (a line
// over 64 KiB goes on in pieces). The
// recorded output gets Handle's whole-output check in StreamedCall.Check.
// Egress denials while it runs are not attributed to it.
//
// A read_file call streams too: decided as Handle decides it, it runs
// cat on the file (a regular file only) as the sandbox user, so its
// bytes reach out as they are, of any size and never cut in-band; the
// first protected line stops it instead (StreamedCall.Withheld), so that a
// reader gets the whole file or an error, never a changed one.
//
// Only bash and read_file stream; a sandbox that is no sandbox.Streamer
// gets an error wrapping sandbox.ErrUnsupported.
//
// stdin keeps the command's stdin open (StreamedCall.Process().Input). out
// receives the output as it comes, stdout and stderr apart, each line
// checked first; it must not block, and nil discards the output. A
// blocked call's dummy output comes to out as one stdout chunk.
func (e *EpisodeState) Start(ctx context.Context, p toolcall.Prepared, stdin bool, out func(sandbox.Output)) (*StreamedCall, error) {
	call := p.Call
	st, ok := e.sb.(sandbox.Streamer)
	if !ok || (call.Tool != toolcall.Bash && call.Tool != toolcall.ReadFile) {
		return nil, fmt.Errorf("monitor: episode %s: start %s: only bash and read_file on a streaming sandbox start: %w", e.id, call.Tool, sandbox.ErrUnsupported)
	}
	if out == nil {
		out = func(sandbox.Output) {}
	}
	start := time.Now()
	res, args, err := e.decideCall(ctx, p)
	if err != nil {
		return nil, err
	}
	r := &StreamedCall{e: e, res: res, decided: res.Decision, call: call, start: start, exited: make(chan struct{})}
	if argsError(call, args) != "" || res.Decision.Action == decision.Block {
		// Nothing runs: answer now, as Handle does (execute runs nothing
		// for bad arguments or a block).
		if err := e.execute(ctx, &r.res, args); err != nil {
			return nil, err
		}
		e.post(ctx, &r.res, start)
		r.checked = true
		if r.res.Output != "" {
			out(sandbox.Output{Stream: sandbox.Stdout, Data: []byte(r.res.Output)})
		}
		close(r.exited)
		return r, nil
	}
	f := &lineFilter{e: e, typed: res.Normalized.Raw, out: out}
	var cmd string
	var timeout time.Duration
	switch a := args.args.(type) {
	case *toolcall.BashArgs:
		cmd, timeout = e.bashCommand(&res, a)
	case *toolcall.ReadFileArgs:
		cmd, timeout = readCommand(e.resolve(call.Session, a.Path)), e.p.cfg.ExecTimeout
		f.whole, stdin = true, false
	}
	r.timeout, r.filter = timeout, f
	t0 := time.Now()
	proc, err := st.Start(ctx, sandbox.StartRequest{Command: cmd, Timeout: timeout, MaxOutput: e.p.cfg.MaxOutput, Stdin: stdin, User: res.Call.User}, f.write)
	if err != nil {
		return nil, fmt.Errorf("monitor: episode %s step %d: start: %w", e.id, res.Step, err)
	}
	r.proc = proc
	f.setProc(proc)
	pctx := context.WithoutCancel(ctx)
	go func() {
		defer close(r.exited)
		r.xr, r.err = proc.Wait(pctx)
		f.flush()
		r.took = time.Since(t0)
	}()
	return r, nil
}

// CheckInput asks the rules about data before it is written to the
// command's stdin: it could be commands to a shell the call started, so
// it is checked as a bash command of the call's session would be. Input
// with a certain flag must not be written: the error wraps
// decision.ErrInputRefused and says why, and the call is labelled with
// the flag when it is checked. Suspicious flags let it through (the
// output and effects checks still follow). The caller serializes it with
// the episode's calls and writes the data (Process().Input) when it
// returns nil.
func (r *StreamedCall) CheckInput(ctx context.Context, data []byte) error {
	e := r.e
	if r.proc == nil {
		return fmt.Errorf("monitor: episode %s step %d: input: nothing runs", e.id, r.res.Step)
	}
	call := toolcall.Call{Tool: toolcall.Bash, Session: r.call.Session, EpisodeID: e.id}
	call.Args, _ = json.Marshal(toolcall.BashArgs{Command: string(data)})
	n, internal := normalizeCall(call, decodedOf(toolcall.Prepare(call)), e.Cwd(call.Session), &e.files)
	flags, err := e.evalRules(ctx, call, n)
	if err != nil {
		return fmt.Errorf("monitor: episode %s step %d: input: rules: %w", e.id, r.res.Step, err)
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
		return fmt.Errorf("monitor: episode %s step %d: %s (%s): %w", e.id, r.res.Step, certain[0].Reason, certain[0].Rule, decision.ErrInputRefused)
	}
	return nil
}

// partialWait is how long a partial line waits for its end before it is
// checked and sent as it is (a prompt that asks for input).
const partialWait = 200 * time.Millisecond

// maxPartial bounds the partial line a stream holds back while it waits
// for the line's end (a file without newlines); beyond it the line is
// checked and passed on in pieces. The check of each piece of a line
// begins with the last partialCarry bytes of the piece before, so a
// commit id split between two is still seen whole (what went out of it
// before, at most 6 hex digits, names no commit).
const (
	maxPartial   = 64 << 10
	partialCarry = 64
)

// readCommand is what a streamed read_file runs: the file's bytes as
// they are, from a regular file only (a FIFO or a device could block or
// never end; a directory is cat's own error).
func readCommand(p string) string {
	return "f=" + shellQuote(p) + `; if [ -e "$f" ] && [ ! -f "$f" ] && [ ! -d "$f" ]; then printf '%s: not a regular file\n' "$f" >&2; exit 1; fi; exec cat -- "$f"`
}

// lineFilter checks streamed output a line at a time before passing it
// on. Chunks come from one goroutine; the partial-line timer is another.
type lineFilter struct {
	e     *EpisodeState
	typed string // the call's own command: its lines are the policy's
	out   func(sandbox.Output)
	// whole: the output is a file, passed on whole or not at all: the
	// first protected line stops it (and kills the process) instead of
	// being left out.
	whole bool

	mu      sync.Mutex
	partial map[string][]byte      // guarded by mu; per stream, the line begun
	sent    map[string][]byte      // guarded by mu; per stream, the end of the line's pieces sent
	timer   map[string]*time.Timer // guarded by mu
	held    bool                   // guarded by mu; output was withheld
	lines   []string               // guarded by mu; whole: the protected line that stopped it
	proc    sandbox.Process        // guarded by mu; whole: killed once held
}

// setProc gives a whole filter the process to kill once it stops.
func (f *lineFilter) setProc(p sandbox.Process) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proc = p
	if f.whole && f.held {
		f.kill()
	}
}

// kill stops the process of a whole filter that stopped. The caller
// holds mu. The signal goes from its own goroutine: out is called from
// the sandbox connection's reader, which the signal's answer needs.
func (f *lineFilter) kill() {
	if p := f.proc; p != nil {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Signal(ctx, syscall.SIGKILL); err != nil {
				f.e.log.Warn("killing a read stopped at protected material", "err", err)
			}
		}()
	}
}

func (f *lineFilter) write(o sandbox.Output) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.whole && f.held {
		return
	}
	if f.partial == nil {
		f.partial, f.timer, f.sent = map[string][]byte{}, map[string]*time.Timer{}, map[string][]byte{}
	}
	buf := append(f.partial[o.Stream], o.Data...)
	end := bytes.LastIndexByte(buf, '\n') + 1
	if end == 0 && len(buf) > maxPartial {
		end = len(buf)
	}
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
	if rest := f.partial[stream]; len(rest) > 0 && !(f.whole && f.held) {
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
	// b's first line may go on a line whose pieces went out already
	// (partial lines): its check begins with their end.
	before := f.sent[stream]
	if b[len(b)-1] == '\n' {
		f.sent[stream] = nil
	} else {
		last := b[bytes.LastIndexByte(b, '\n')+1:]
		if len(last) == len(b) {
			last = append(append([]byte(nil), before...), last...)
		}
		f.sent[stream] = append([]byte(nil), last[max(len(last)-partialCarry, 0):]...)
	}
	var kept []byte
	f.e.mu.RLock()
	for rest := b; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n') + 1
		if i == 0 {
			i = len(rest)
		}
		line := rest[:i]
		rest = rest[i:]
		l := strings.TrimSuffix(string(line), "\n")
		joined := ""
		if len(before) > 0 {
			joined, before = string(before)+l, nil
		}
		if !f.protected(l) && (joined == "" || !f.protected(joined)) {
			kept = append(kept, line...)
			continue
		}
		f.held = true
		if f.whole {
			f.lines = append(f.lines, l)
			f.kill()
			break
		}
	}
	f.e.mu.RUnlock()
	if len(kept) > 0 {
		f.out(sandbox.Output{Stream: stream, Data: kept})
	}
}

// protected reports a line the whole-output check could withhold. The
// caller holds the episode's mu for reading.
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
