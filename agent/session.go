package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// DefaultTimeout is an ExecRequest's timeout when it gives none.
const DefaultTimeout = 60 * time.Second

// drainAfterExit bounds how long output is still read after the shell
// exited, for background processes that keep the pipe open. A variable so a
// test can make it pass before the reader runs, as a loaded machine does.
var drainAfterExit = 20 * time.Millisecond

// Shell kinds.
const (
	shellBash = "bash"
	shellSh   = "sh"
)

// session is one persistent shell. In persistent mode (bash) one
// long-lived shell runs the calls; in per-call mode (and for sh) each call
// runs a fresh shell. Either way the state captured after the last
// completed call (exported variables, functions, cwd) is kept, so killing
// a call on timeout never loses the session: the next call's shell starts
// from it.
type session struct {
	name string
	sem  chan struct{} // one slot: calls of a session are serialized

	// Guarded by sem.
	started bool
	cwd     string
	env     []string // bash: exported variables after the last call
	funcs   string   // bash: `declare -f` after the last call
	exports string   // sh: `export -p` after the last call
	sh      *pshell  // persistent mode: the live shell, nil before the first call or after one died
	dir     string   // persistent mode: where the command file is written
	// Persistent mode: the open command and stdin files in dir.
	cmdFile, stdinFile *os.File
}

func newSession(name string) *session {
	return &session{name: name, sem: make(chan struct{}, 1)}
}

func (s *session) lock(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *session) unlock() { <-s.sem }

// Bootstrap scripts. fd 3 carries the restore script, fd 4 the command, fd
// 5 receives the state dump: NUL-terminated records C<cwd>, E<name=value>
// (bash), F<declare -f> (bash) or X<export -p> (sh). The dump runs from the
// EXIT trap (covers `exit N` and set -e) and again after the command (covers
// a command that replaced the trap). Builtins are called through `builtin`
// so user functions named printf or pwd cannot break the capture.
const (
	dumpBash = `__rc_status=$?; set +eu; trap - EXIT; IFS=$' \t\n'; ` +
		`{ builtin printf C; builtin pwd; builtin printf '\0'; ` +
		`if ((BASH_VERSINFO[0]*100+BASH_VERSINFO[1] >= 404)); then ` +
		`for __rc_n in ` + bashAllVars + `; do [[ ${!__rc_n@a} == *x* ]] && builtin printf 'E%s=%s\0' "$__rc_n" "${!__rc_n}"; done; ` +
		`else for __rc_n in $(builtin compgen -e); do builtin printf 'E%s=%s\0' "$__rc_n" "${!__rc_n}"; done; fi; ` +
		`builtin printf 'F'; builtin declare -f; builtin printf '\0'; } >&5 2>/dev/null; exit $__rc_status`
	dumpSh = `__rc_status=$?; set +eu; trap - EXIT; ` +
		`{ printf C; pwd; printf '\0'; printf 'X'; export -p; printf '\0'; } >&5 2>/dev/null; exit $__rc_status`
	// bashAllVars names every shell variable without forking (compgen -e in
	// $(...) costs a fork per call); ${!name@a} needs bash 4.4.
	bashAllVars = `${!a*} ${!b*} ${!c*} ${!d*} ${!e*} ${!f*} ${!g*} ${!h*} ${!i*} ${!j*} ${!k*} ${!l*} ${!m*} ${!n*} ${!o*} ${!p*} ${!q*} ${!r*} ${!s*} ${!t*} ${!u*} ${!v*} ${!w*} ${!x*} ${!y*} ${!z*} ${!A*} ${!B*} ${!C*} ${!D*} ${!E*} ${!F*} ${!G*} ${!H*} ${!I*} ${!J*} ${!K*} ${!L*} ${!M*} ${!N*} ${!O*} ${!P*} ${!Q*} ${!R*} ${!S*} ${!T*} ${!U*} ${!V*} ${!W*} ${!X*} ${!Y*} ${!Z*} ${!_*}`
	// The shell's command line stays this short (what `ps` shows the
	// policy); the rest of the bootstrap arrives on fd 3.
	bootstrap = `. /dev/fd/3`
	// The dump runs with stderr to /dev/null so a command's `set -x` does
	// not trace it into the output.
	runTail = "\nexec 3<&-; trap '{ eval \"$__rc_dump\"; } 2>/dev/null' EXIT; . /dev/fd/4; { eval \"$__rc_dump\"; } 2>/dev/null\n"
)

// skipEnv are variables the shell maintains itself; restoring them would
// only fight it.
var skipEnv = map[string]bool{"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true}

// execEnv is what a call needs from the server.
type execEnv struct {
	shellPath string
	shell     string // shellBash or shellSh
	cred      *syscall.Credential
	baseEnv   []string
	workdir   string
	mode      string  // ModePersistent or ModePerCall
	nest      *nester // a root sandbox's zygote; nil otherwise
}

// run executes one call in s. The caller holds s's lock. Cancelling ctx
// kills the process group and reports StopCancelled. sh always runs per
// call: dash has no way to dump variables and functions without forking,
// and a per-call sh is what minimal images get.
func (s *session) run(ctx context.Context, e execEnv, req sandbox.ExecRequest, started func(pgid int)) (sandbox.ExecResult, error) {
	if e.shell == shellBash && e.mode != ModePerCall {
		return s.runPersistent(ctx, e, req, started)
	}
	return s.runPerCall(ctx, e, req, started)
}

// runPerCall runs the call in a fresh shell that restores the session's
// state from fd 3, sources the command from fd 4 and dumps the state to fd 5.
func (s *session) runPerCall(ctx context.Context, e execEnv, req sandbox.ExecRequest, started func(pgid int)) (sandbox.ExecResult, error) {
	out := newCapBuffer(req.MaxOutput)
	res := sandbox.ExecResult{Shell: e.shell}

	release := holdStart()
	defer release()
	pipes := userPipes{cred: e.cred}
	defer pipes.closeAll()
	stateR, stateW := pipes.pipe("state")
	cmdR, cmdW := pipes.pipe("command")
	dumpR, dumpW := pipes.pipe("dump")
	outR, outW := pipes.pipe("output")
	var stdinR, stdinW *os.File
	if req.Stdin != "" {
		stdinR, stdinW = pipes.pipe("stdin")
	}
	if pipes.err != nil {
		return res, pipes.err
	}

	dump := dumpBash
	if e.shell == shellSh {
		dump = dumpSh
	}
	cmd := bootstrapShell(e.shellPath, e.shell, e.cred, s.environ(e), "/")
	cmd.Stdout, cmd.Stderr = outW, outW
	if stdinR != nil {
		cmd.Stdin = stdinR
	}
	cmd.ExtraFiles = []*os.File{stateR, cmdR, dumpW}

	start := time.Now()
	if err := startCmd(e.nest, cmd); err != nil {
		return res, fmt.Errorf("start %s: %w", e.shellPath, err)
	}
	pgid := cmd.Process.Pid
	if started != nil {
		started(pgid)
	}
	// The child has its copies; ours would keep the pipes open forever.
	for _, f := range []*os.File{stateR, cmdR, dumpW, outW, stdinR} {
		if f != nil {
			f.Close()
		}
	}
	release()

	go writeAndClose(stateW, s.restoreScript(e, dump))
	go writeAndClose(cmdW, req.Command)
	if stdinW != nil {
		go writeAndClose(stdinW, req.Stdin)
	}

	var lastOut atomic.Int64
	lastOut.Store(time.Now().UnixNano())
	outDone := make(chan struct{})
	go readCapped(outR, out, &lastOut, outDone)
	var dumpBuf bytes.Buffer
	dumpDone := make(chan struct{})
	go func() {
		defer close(dumpDone)
		buf := make([]byte, 4<<10)
		for { // ends at EOF or at the drain deadline
			n, err := dumpR.Read(buf)
			dumpBuf.Write(buf[:n])
			if errors.Is(err, os.ErrDeadlineExceeded) {
				drainNow(dumpR, func(b []byte) { dumpBuf.Write(b) })
				return
			}
			if err != nil {
				return
			}
		}
	}()

	waitCh := make(chan error, 1)
	go func() { waitCh <- waitCmd(cmd) }()

	clock := startClock(req)
	defer clock.stop()
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-waitCh:
			break loop
		case <-clock.hard.C:
			res.Stopped = sandbox.StopTimeout
		case <-clock.idle:
			if !clock.idleOver(lastOut.Load()) {
				continue
			}
			res.Stopped = sandbox.StopIdle
		case <-ctx.Done():
			res.Stopped = StopCancelled
		}
		// Kill the whole group, including what the command backgrounded.
		syscall.Kill(-pgid, syscall.SIGKILL)
		waitErr = <-waitCh
		break
	}
	res.Duration = time.Since(start)

	// Whatever the shell wrote is in the pipes now; wait only briefly for
	// background processes that still hold them.
	deadline := time.Now().Add(drainAfterExit)
	outR.SetReadDeadline(deadline)
	dumpR.SetReadDeadline(deadline)
	<-outDone
	<-dumpDone

	res.ExitCode = exitCode(cmd.ProcessState, waitErr)
	if res.Stopped == "" {
		s.absorb(e, dumpBuf.Bytes())
	}
	out.fill(&res)
	res.Cwd = s.cwdOr(e.workdir)
	return res, nil
}

// readCapped copies r into out until EOF or the read deadline, then closes
// done and keeps discarding, so a background process that still writes
// does not get EPIPE (and die) just because its starter returned.
func readCapped(r *os.File, out *capBuffer, lastOut *atomic.Int64, done chan struct{}) {
	buf := make([]byte, 32<<10)
	finished := false
	finish := func() {
		if !finished {
			finished = true
			close(done)
		}
	}
	defer func() {
		finish()
		r.Close()
	}()
	for {
		n, err := r.Read(buf)
		if n > 0 && !finished {
			out.Write(buf[:n])
			lastOut.Store(time.Now().UnixNano())
		}
		if err == nil {
			continue
		}
		if !finished && errors.Is(err, os.ErrDeadlineExceeded) {
			drainNow(r, func(b []byte) {
				out.Write(b)
				lastOut.Store(time.Now().UnixNano())
			})
			finish()
			r.SetReadDeadline(time.Time{})
			continue
		}
		return
	}
}

// drainNow reads what the pipe holds at this moment without waiting. A
// read deadline that passed while the reading goroutine was not scheduled
// (a loaded machine) makes Read fail before it looks at the pipe; what the
// shell wrote before it exited is still there and must not be lost.
func drainNow(r *os.File, write func([]byte)) {
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 32<<10)
	rc.Control(func(fd uintptr) {
		for {
			n, err := syscall.Read(int(fd), buf)
			if n > 0 {
				write(buf[:n])
			}
			if err != nil || n <= 0 { // EAGAIN: empty for now; 0: EOF
				return
			}
		}
	})
}

// bootstrapShell is the command of a call's fresh shell: it sources
// bootstrap from fd 3 (bash without profile or rc files), in a process
// group of its own, as cred.
func bootstrapShell(path, shell string, cred *syscall.Credential, env []string, dir string) *exec.Cmd {
	cmd := exec.Command(path, "-c", bootstrap)
	if shell == shellBash {
		cmd.Args = []string{"bash", "--noprofile", "--norc", "-c", bootstrap}
	}
	cmd.Env, cmd.Dir = env, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	return cmd
}

// callTimeout is an ExecRequest's timeout, DefaultTimeout when it gives
// none.
func callTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultTimeout
	}
	return d
}

// clock is a call's timers: the hard timeout and, when the request has
// one, the idle timeout (idle is nil without).
type clock struct {
	hard        *time.Timer
	idleTimer   *time.Timer
	idle        <-chan time.Time
	idleTimeout time.Duration
}

func startClock(req sandbox.ExecRequest) *clock {
	c := &clock{hard: time.NewTimer(callTimeout(req.Timeout)), idleTimeout: req.IdleTimeout}
	if req.IdleTimeout > 0 {
		c.idleTimer = time.NewTimer(req.IdleTimeout)
		c.idle = c.idleTimer.C
	}
	return c
}

func (c *clock) stop() {
	c.hard.Stop()
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
}

// idleOver is called when the idle timer fired: it reports whether the
// output (last written at lastOut, unix nanoseconds) has been quiet for
// the whole idle timeout, and if not, re-arms the timer for the rest.
func (c *clock) idleOver(lastOut int64) bool {
	quiet := time.Since(time.Unix(0, lastOut))
	if quiet < c.idleTimeout {
		c.idleTimer.Reset(c.idleTimeout - quiet)
		return false
	}
	return true
}

func writeAndClose(w *os.File, s string) {
	io.WriteString(w, s) // EPIPE when the shell died first; nothing to do
	w.Close()
}

func exitCode(ps *os.ProcessState, waitErr error) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// environ is the environment of the next call's shell.
func (s *session) environ(e execEnv) []string {
	if e.shell == shellBash && s.started {
		return append([]string(nil), s.env...)
	}
	return append([]string(nil), e.baseEnv...)
}

// restoreScript brings a fresh shell to the session's state, then runs the
// command from fd 4. The dump script is a plain shell variable, so commands
// never see it in their environment. Restore errors (a readonly variable)
// are silenced: they are the image's business, not the command's.
func (s *session) restoreScript(e execEnv, dump string) string {
	var b strings.Builder
	b.WriteString("__rc_dump=")
	b.WriteString(shellQuote(dump))
	b.WriteString("\n{\n")
	if e.shell == shellBash {
		b.WriteString(s.funcs)
	} else {
		b.WriteString(s.exports)
	}
	cd := "cd" // dash has no `builtin`
	if e.shell == shellBash {
		cd = "builtin cd" // a user function named cd must not move the restore
	}
	b.WriteString("\n" + cd + " -- ")
	b.WriteString(shellQuote(s.cwdOr(e.workdir)))
	b.WriteString(" || " + cd + " -- ")
	b.WriteString(shellQuote(e.workdir))
	b.WriteString("\n} 2>/dev/null")
	b.WriteString(runTail)
	return b.String()
}

func (s *session) cwdOr(def string) string {
	if s.cwd != "" {
		return s.cwd
	}
	return def
}

// absorb takes the state dump of a completed call. A missing or malformed
// dump (the command closed fd 5, or was killed) keeps the previous state.
func (s *session) absorb(e execEnv, dump []byte) {
	if len(dump) == 0 {
		return
	}
	recs := bytes.Split(dump, []byte{0})
	var (
		cwd     string
		env     []string
		funcs   string
		exports string
		gotCwd  bool
		gotTail bool
		gotX    bool
	)
	for _, r := range recs {
		if len(r) == 0 {
			continue
		}
		v := string(r[1:])
		switch r[0] {
		case 'C':
			cwd, gotCwd = strings.TrimSuffix(v, "\n"), true
		case 'E':
			name, _, _ := strings.Cut(v, "=")
			if !skipEnv[name] && !strings.HasPrefix(name, "__rc_") {
				env = append(env, v)
			}
		case 'F':
			funcs, gotTail = v, true
		case 'X':
			exports, gotTail, gotX = v, true, true
		}
	}
	if !gotCwd || !gotTail {
		return
	}
	s.started = true
	s.cwd = cwd
	switch {
	case e.shell == shellBash && gotX:
		// Persistent mode: a fresh shell starts with an empty environment
		// and evaluates the exports (see startShell).
		s.env, s.funcs, s.exports = nil, funcs, exports
	case e.shell == shellBash:
		s.env, s.funcs = env, funcs
	default:
		s.exports = exports
	}
}

// shellQuote quotes s for any POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
