package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rollcage/rollcage/sandbox"
)

// Shell modes: how a session's calls reach bash.
const (
	// ModePersistent keeps one bash per session alive between calls; a
	// call costs a few pipe writes instead of a process start.
	ModePersistent = "persistent"
	// ModePerCall starts a fresh shell per call that restores the
	// session's state; slower, but nothing outlives a call but its
	// background jobs.
	ModePerCall = "percall"
)

// Control fds inside a persistent shell. High numbers, so a command's own
// `exec 3>...` does not collide; bash itself allocates from 10 upwards but
// only takes free fds.
const (
	fdControl = 61 // shell → agent: state records and end markers
	fdOutput  = 62 // a saved copy of the output pipe, to undo `exec >file`
)

// pshell is a session's long-lived bash. The shell reads its script from a
// pipe (fd 255 once bash opened /dev/fd/3): the agent writes one line per
// call that sources the command from a file, so a command with an unclosed
// quote fails as a whole instead of swallowing the next call, and a command
// reading stdin reads its own input, never the control stream.
type pshell struct {
	cmd   *exec.Cmd
	pgid  int
	ctlIn *os.File // agent → shell: the script, one line per call
	// outW is the agent's own copy of the output pipe's write end: after
	// the shell reported a call done, the agent writes the sync token,
	// which so lands after everything the command wrote. (A token the
	// shell wrote itself would be lost to a command's `exec 62>&-`.)
	outW  *os.File
	nonce string
	dir   string // the session's command dir when the shell started
	seq   uint64 // guarded by the session's lock

	exited  chan struct{} // closed once the shell was reaped
	waitErr error         // set before exited closes

	ctl     *os.File      // shell → agent: records and markers
	ctlDone chan struct{} // closed when the control reader stopped

	evMu   sync.Mutex
	events []ctlEvent    // guarded by evMu
	notify chan struct{} // one slot: events has news

	out *outPipe
}

// ctlEvent is one end marker: R after a call completed, Q from the EXIT
// trap when the command ended the shell. dump holds the state records
// written just before it.
type ctlEvent struct {
	mark byte
	seq  uint64
	rc   int
	dump []byte
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// persistentPost is evaluated after each call (mark R) and from the EXIT
// trap (mark Q): the state records and the end marker go to the control fd. Three builtins, no fork, no loop over
// variables (that loop cost 0.6 ms a call): the exports come as `export
// -p` text that a fresh shell evaluates to restore them.
func persistentPost(nonce string) string {
	return `set +eu; ` +
		`{ builtin printf C; builtin pwd; builtin printf '\0X'; builtin export -p; ` +
		`builtin printf '\0F'; builtin declare -f; builtin printf '\0'; ` +
		`builtin printf '%s\0' "${__rc_mark}` + nonce + ` ${__rc_seq} ${__rc_status}"; } >&` + strconv.Itoa(fdControl)
}

// trapScript runs on EXIT: `exit N`, set -e, a fatal signal bash handles.
const trapScript = `{ __rc_status=$?; set +x; __rc_mark=Q; eval "$__rc_post"; } 2>/dev/null`

// callScript runs one call; the shell keeps it in a variable because bash
// reads its script from a pipe a byte per syscall, so the line the agent
// writes per call (callLine) must be short. xtrace is switched off before
// anything of ours runs traced; errexit, nounset and xtrace do not outlive
// the call that set them, as in per-call mode; fds 1 and 2 are put back in
// case the command redirected them with exec.
func callScript(cmdPath, stdinPath string) string {
	return fmt.Sprintf("builtin trap -- \"$__rc_trap\" EXIT; builtin source %s <%s; "+
		"{ __rc_status=$?; set +eux; } 2>/dev/null; exec 1>&%d 2>&%d; { __rc_mark=R; eval \"$__rc_post\"; } 2>/dev/null",
		shellQuote(cmdPath), shellQuote(stdinPath), fdOutput, fdOutput)
}

// callLine is what the agent writes per call: the sequence number the end
// marker echoes, and which stdin to use.
func callLine(seq uint64, stdin bool) string {
	v := "__rc_call"
	if stdin {
		v = "__rc_call_in"
	}
	return "__rc_seq=" + strconv.FormatUint(seq, 10) + "; eval \"$" + v + "\"\n"
}

// startShell starts a session's persistent bash, restored to s's state.
// The caller holds s's lock.
func (s *session) startShell(e execEnv, started func(pgid int)) (sh *pshell, err error) {
	defer holdStart()()
	pipes := userPipes{cred: e.cred}
	defer pipes.closeAll()
	scriptR, scriptW := pipes.pipe("script")
	ctlR, ctlW := pipes.pipe("control")
	outR, outW := pipes.pipe("output")
	if pipes.err != nil {
		return nil, pipes.err
	}

	cmd := exec.Command(e.shellPath, "--noprofile", "--norc", "/dev/fd/3")
	cmd.Args[0] = "bash"
	cmd.Env = s.environ(e)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = outW, outW
	cmd.ExtraFiles = []*os.File{scriptR, ctlW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: e.cred}
	if err := startCmd(e.nest, cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", e.shellPath, err)
	}
	pipes.keep()
	scriptR.Close()
	ctlW.Close()

	sh = &pshell{
		cmd:     cmd,
		pgid:    cmd.Process.Pid,
		ctlIn:   scriptW,
		outW:    outW,
		nonce:   randHex(8),
		exited:  make(chan struct{}),
		ctl:     ctlR,
		ctlDone: make(chan struct{}),
		notify:  make(chan struct{}, 1),
		out:     newOutPipe(outR, "\x00rollcage-sync-"+randHex(16)+"\x00"),
	}
	if started != nil {
		started(sh.pgid)
	}
	// The goroutine gets the shell by value: sh is a named result, and
	// the error returns below write it (a race the detector caught).
	go func(p *pshell) {
		p.waitErr = waitCmd(cmd)
		close(p.exited)
	}(sh)
	go sh.readControl()
	go sh.out.loop()

	// The restore script, sourced (read whole, not byte by byte): the
	// call, post and trap scripts as plain variables (never exported),
	// then the session's exports, functions and directory. Restore errors
	// are silenced as in per-call mode.
	var b strings.Builder
	b.WriteString("__rc_post=" + shellQuote(persistentPost(sh.nonce)) + "\n")
	b.WriteString("__rc_trap=" + shellQuote(trapScript) + "\n")
	b.WriteString("__rc_call=" + shellQuote(callScript(s.cmdPath(), "/dev/null")) + "\n")
	b.WriteString("__rc_call_in=" + shellQuote(callScript(s.cmdPath(), s.stdinPath())) + "\n")
	b.WriteString("{\n")
	b.WriteString(s.exports)
	b.WriteString("\n")
	b.WriteString(s.funcs)
	b.WriteString("\nbuiltin cd -- " + shellQuote(s.cwdOr(e.workdir)) + " || builtin cd -- " + shellQuote(e.workdir))
	b.WriteString("\n} 2>/dev/null\n")
	restore := s.dir + "/restore"
	if err := os.WriteFile(restore, []byte(b.String()), 0o644); err != nil {
		sh.kill()
		return nil, fmt.Errorf("write restore script: %w", err)
	}
	sh.dir = s.dir
	line := fmt.Sprintf("exec %d>&4 %d>&1 3<&- 4>&-; builtin source %s\n", fdControl, fdOutput, shellQuote(restore))
	if err := sh.send(line, time.Now().Add(10*time.Second)); err != nil {
		sh.kill()
		return nil, fmt.Errorf("restore session: %w", err)
	}
	return sh, nil
}

// send writes script text to the shell, giving up at deadline (a stopped
// shell does not read).
func (sh *pshell) send(text string, deadline time.Time) error {
	sh.ctlIn.SetWriteDeadline(deadline)
	_, err := sh.ctlIn.WriteString(text)
	return err
}

// kill ends the shell's whole process group, background jobs included.
func (sh *pshell) kill() {
	syscall.Kill(-sh.pgid, syscall.SIGKILL)
}

func (sh *pshell) dead() bool {
	select {
	case <-sh.exited:
		return true
	default:
		return false
	}
}

// release closes the agent's end of the script after the shell died. The
// output reader stays until the last background job closed the pipe.
func (sh *pshell) release() {
	sh.ctlIn.Close()
	sh.outW.Close()
}

// readControl turns the control stream into events. Records are
// NUL-terminated; a record R<nonce> <seq> <rc> or Q<nonce> <seq> <rc> ends a
// call's dump. It stops at EOF, or after finishControl, having read what
// the pipe held: children may keep fd 61 open, so EOF is no sign of death.
func (sh *pshell) readControl() {
	defer close(sh.ctlDone)
	defer sh.ctl.Close()
	var buf []byte
	start := 0 // start of the first unparsed record in buf
	feed := func(p []byte) {
		buf = append(buf, p...)
		for {
			i := bytes.IndexByte(buf[start:], 0)
			if i < 0 {
				return
			}
			rec := buf[start : start+i]
			next := start + i + 1
			if ev, ok := sh.parseMark(rec); ok {
				ev.dump = append([]byte(nil), buf[:start]...)
				sh.evMu.Lock()
				sh.events = append(sh.events, ev)
				sh.evMu.Unlock()
				select {
				case sh.notify <- struct{}{}:
				default:
				}
				buf = append(buf[:0], buf[next:]...)
				start = 0
				continue
			}
			start = next
		}
	}
	tmp := make([]byte, 32<<10)
	for {
		n, err := sh.ctl.Read(tmp)
		feed(tmp[:n])
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				drainNow(sh.ctl, feed)
			}
			return
		}
	}
}

func (sh *pshell) parseMark(rec []byte) (ctlEvent, bool) {
	if len(rec) < 1+len(sh.nonce) || (rec[0] != 'R' && rec[0] != 'Q') || string(rec[1:1+len(sh.nonce)]) != sh.nonce {
		return ctlEvent{}, false
	}
	f := strings.Fields(string(rec[1+len(sh.nonce):]))
	if len(f) != 2 {
		return ctlEvent{}, false
	}
	seq, err1 := strconv.ParseUint(f[0], 10, 64)
	rc, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return ctlEvent{}, false
	}
	return ctlEvent{mark: rec[0], seq: seq, rc: rc}, true
}

// finishControl makes the control reader take what the pipe holds now and
// stop. Called once the shell is dead, so the pipe holds all it wrote.
func (sh *pshell) finishControl() {
	sh.ctl.SetReadDeadline(time.Now())
	<-sh.ctlDone
}

// takeEvent returns the marker of call seq, dropping stale ones.
func (sh *pshell) takeEvent(seq uint64) (ctlEvent, bool) {
	sh.evMu.Lock()
	defer sh.evMu.Unlock()
	for len(sh.events) > 0 {
		ev := sh.events[0]
		sh.events = sh.events[1:]
		if ev.seq == seq {
			return ev, true
		}
	}
	return ctlEvent{}, false
}

// outPipe reads a shell's output pipe for its whole life. Bytes go to the
// current call's buffer (sink) or, between calls, nowhere: background jobs
// may write at any time and must never block or corrupt a call. A call
// ends its output with a sync token the shell writes after the command
// finished; the reader cuts there, so no deadline guesses the end.
type outPipe struct {
	r       *os.File
	token   []byte
	lastOut atomic.Int64 // unix nanos of the last byte read

	synced  chan struct{} // one slot: a token passed
	drained chan struct{} // closed at EOF or after a finish deadline
	drainMu sync.Once

	mu   sync.Mutex
	sink *capBuffer // guarded by mu; nil: discard

	carry []byte // loop only: a tail that may be the start of a token
}

func newOutPipe(r *os.File, token string) *outPipe {
	return &outPipe{r: r, token: []byte(token), synced: make(chan struct{}, 1), drained: make(chan struct{})}
}

// begin points the output at out until the next token or finish.
func (p *outPipe) begin(out *capBuffer) {
	p.mu.Lock()
	p.sink = out
	p.mu.Unlock()
	p.lastOut.Store(time.Now().UnixNano())
	select { // a token a command printed itself must not end this call early
	case <-p.synced:
	default:
	}
}

func (p *outPipe) emit(b []byte) {
	if len(b) == 0 {
		return
	}
	p.mu.Lock()
	if p.sink != nil {
		p.sink.Write(b)
	}
	p.mu.Unlock()
}

// feed passes b on, cutting at tokens; a tail that could be a token's
// beginning waits for the next read.
func (p *outPipe) feed(b []byte) {
	if len(b) == 0 {
		return
	}
	p.lastOut.Store(time.Now().UnixNano())
	data := b
	if len(p.carry) > 0 {
		data = append(p.carry, b...)
		p.carry = p.carry[:0]
	}
	for {
		i := bytes.Index(data, p.token)
		if i < 0 {
			break
		}
		p.emit(data[:i])
		p.mu.Lock()
		p.sink = nil
		p.mu.Unlock()
		select {
		case p.synced <- struct{}{}:
		default:
		}
		data = data[i+len(p.token):]
	}
	keep := 0
	for k := min(len(p.token)-1, len(data)); k > 0; k-- {
		if bytes.HasSuffix(data, p.token[:k]) {
			keep = k
			break
		}
	}
	p.emit(data[:len(data)-keep])
	p.carry = append(p.carry[:0], data[len(data)-keep:]...)
}

func (p *outPipe) loop() {
	defer p.r.Close()
	defer p.markDrained()
	buf := make([]byte, 32<<10)
	for {
		n, err := p.r.Read(buf)
		p.feed(buf[:n])
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			drainNow(p.r, p.feed)
			p.markDrained()
			p.r.SetReadDeadline(time.Time{})
			continue // keep discarding: a background job must not get EPIPE
		}
		return
	}
}

// markDrained hands the held-back tail to the call and detaches it.
func (p *outPipe) markDrained() {
	p.drainMu.Do(func() {
		p.emit(p.carry)
		p.carry = nil
		p.mu.Lock()
		p.sink = nil
		p.mu.Unlock()
		close(p.drained)
	})
}

// finish is the end of a call whose shell died (killed, exit): what it
// wrote is in the pipe; background jobs holding the pipe get drainAfterExit.
func (p *outPipe) finish(w *os.File) {
	w.Close() // the agent's copy must not hold the pipe open
	p.r.SetReadDeadline(time.Now().Add(drainAfterExit))
	<-p.drained
}

// runPersistent executes one call in the session's persistent shell,
// starting one (restored to the last completed call's state) when there is
// none or the last one died. The caller holds s's lock.
func (s *session) runPersistent(ctx context.Context, e execEnv, req sandbox.ExecRequest, started func(pgid int)) (sandbox.ExecResult, error) {
	res := sandbox.ExecResult{Shell: e.shell}
	start := time.Now()
	deadline := start.Add(callTimeout(req.Timeout))

	if s.sh != nil && s.sh.dead() {
		s.dropShell()
	}
	if err := s.writeCallFiles(req); err != nil {
		return res, err
	}
	if s.sh != nil && s.sh.dir != s.dir {
		// The command dir was recreated; the shell knows the old path.
		s.sh.kill()
		<-s.sh.exited
		s.dropShell()
	}
	if s.sh == nil {
		sh, err := s.startShell(e, started)
		if err != nil {
			return res, err
		}
		s.sh = sh
	}
	sh := s.sh
	out := newCapBuffer(req.MaxOutput)
	sh.out.begin(out)
	sh.seq++
	seq := sh.seq

	clock := startClock(req)
	defer clock.stop()

	var (
		rc      int
		haveRC  bool
		syncC   <-chan struct{}
		exitedC = sh.exited
	)
	if err := sh.send(callLine(seq, req.Stdin != ""), deadline); err != nil && !sh.dead() {
		// The shell does not read its script (stopped, or wedged): treat
		// it as a timeout rather than wait.
		res.Stopped = sandbox.StopTimeout
		sh.kill()
	}
loop:
	for res.Stopped == "" {
		select {
		case <-sh.notify:
			if ev, ok := sh.takeEvent(seq); ok {
				// Q means the shell is exiting: its dump is the state at
				// `exit`, and the exit code comes from the wait status.
				s.absorb(e, ev.dump)
				if ev.mark == 'R' {
					rc, haveRC = ev.rc, true
					syncC = sh.out.synced
					sh.outW.SetWriteDeadline(deadline)
					if _, err := sh.outW.Write(sh.out.token); err != nil {
						res.Stopped = sandbox.StopTimeout // the pipe stayed full to the deadline
					}
				}
			}
		case <-syncC:
			// The token followed everything the command wrote.
			res.ExitCode = rc
			break loop
		case <-exitedC:
			// Any Q marker the shell wrote before it died is in the pipe.
			sh.finishControl()
			if ev, ok := sh.takeEvent(seq); ok {
				s.absorb(e, ev.dump)
				if ev.mark == 'R' {
					rc, haveRC = ev.rc, true
				}
			}
			sh.out.finish(sh.outW)
			res.ExitCode = exitCode(sh.cmd.ProcessState, sh.waitErr)
			if haveRC {
				res.ExitCode = rc
			}
			s.dropShell()
			break loop
		case <-clock.hard.C:
			res.Stopped = sandbox.StopTimeout
		case <-clock.idle:
			if !clock.idleOver(sh.out.lastOut.Load()) {
				continue
			}
			res.Stopped = sandbox.StopIdle
		case <-ctx.Done():
			res.Stopped = StopCancelled
		}
	}
	if res.Stopped != "" {
		// Kill the whole group, including what the command backgrounded;
		// the next call gets a fresh shell with the last completed state.
		sh.kill()
		<-sh.exited
		sh.finishControl()
		sh.out.finish(sh.outW)
		res.ExitCode = exitCode(sh.cmd.ProcessState, sh.waitErr)
		s.dropShell()
	}
	res.Duration = time.Since(start)
	out.fill(&res)
	res.Cwd = s.cwdOr(e.workdir)
	return res, nil
}

// dropShell forgets a dead shell.
func (s *session) dropShell() {
	if s.sh != nil {
		s.sh.release()
		s.sh = nil
	}
}

func (s *session) cmdPath() string   { return s.dir + "/cmd" }
func (s *session) stdinPath() string { return s.dir + "/stdin" }

// callFilesDir is where sessions' command files go: /dev/shm, a tmpfs
// charged to the sandbox's memory, where there is one, so that a sandbox
// whose disk limit the kernel holds full can still run the command that
// deletes files; else the temporary directory.
func callFilesDir() string {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err == nil && st.Type == unix.TMPFS_MAGIC && unix.Access("/dev/shm", unix.W_OK) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}

// writeCallFiles puts the command (and stdin) where the shell sources it
// from (callFilesDir). The directory is the agent's (0755, files 0644): the
// sandbox user reads them but, in a sticky directory, cannot remove them. The files stay open
// and are overwritten in place: on ext4 an O_TRUNC rewrite costs ~0.9 ms
// (the truncate forces the old blocks out), a pwrite+ftruncate ~7 µs.
func (s *session) writeCallFiles(req sandbox.ExecRequest) error {
	if s.dir != "" && !s.filesIntact() {
		// Removed under us (a command cleaning /tmp as the agent's own
		// user): start over in a new dir.
		s.closeFiles()
	}
	if s.dir == "" {
		dir, err := os.MkdirTemp(callFilesDir(), ".rollcage-session-")
		if err != nil {
			return fmt.Errorf("command dir: %w", err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			return fmt.Errorf("command dir: %w", err)
		}
		for _, f := range []**os.File{&s.cmdFile, &s.stdinFile} {
			path := dir + "/cmd"
			if f == &s.stdinFile {
				path = dir + "/stdin"
			}
			if *f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
				s.closeFiles()
				os.RemoveAll(dir)
				return fmt.Errorf("command file: %w", err)
			}
		}
		s.dir = dir
	}
	overwrite := func(f *os.File, text string) error {
		if _, err := f.WriteAt([]byte(text), 0); err != nil {
			return err
		}
		return f.Truncate(int64(len(text)))
	}
	if err := overwrite(s.cmdFile, req.Command); err != nil {
		return fmt.Errorf("write command: %w", err)
	}
	if req.Stdin != "" {
		if err := overwrite(s.stdinFile, req.Stdin); err != nil {
			return fmt.Errorf("write stdin: %w", err)
		}
	}
	return nil
}

// filesIntact reports whether the command file is still the one we hold.
func (s *session) filesIntact() bool {
	a, err1 := s.cmdFile.Stat()
	b, err2 := os.Stat(s.cmdPath())
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

func (s *session) closeFiles() {
	for _, f := range []**os.File{&s.cmdFile, &s.stdinFile} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
	s.dir = ""
}

// close kills the session's shell and removes its command files; for
// server shutdown. A call still holding the session keeps them.
func (s *session) close() {
	select {
	case s.sem <- struct{}{}:
	default:
		return
	}
	defer s.unlock()
	if s.sh != nil {
		s.sh.kill()
		s.dropShell()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.closeFiles()
	}
}
