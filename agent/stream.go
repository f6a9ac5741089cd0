package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// sproc is a streamed command while it runs: what opInput and opSignal
// reach by the id of the request that started it.
type sproc struct {
	pgid int

	mu     sync.Mutex
	stdin  *os.File // guarded by mu; nil without Stdin or once closed
	exited bool     // guarded by mu; the shell was reaped (the group may be gone)
}

func (p *sproc) input(data []byte, closeAfter bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin == nil {
		return badRequest("the process's stdin is not open: start it with stdin, and do not write after closing it")
	}
	if len(data) > 0 {
		if _, err := p.stdin.Write(data); err != nil {
			return badRequest("write to the process's stdin: %v (it closed its stdin or exited)", err)
		}
	}
	if closeAfter {
		p.stdin.Close()
		p.stdin = nil
	}
	return nil
}

func (p *sproc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return nil
	}
	if err := syscall.Kill(-p.pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %d to process group %d: %w", sig, p.pgid, err)
	}
	return nil
}

// startStream runs req in a fresh shell with stdout and stderr on
// separate pipes. emit gets the pid first, then every chunk as it is
// read; the result keeps both interleaved and capped, as Exec does.
// Cancelling ctx (the cancel op, shutdown) kills the process group.
func (s *Server) startStream(ctx context.Context, req sandbox.StartRequest, started func(*sproc), emit func(response)) (sandbox.ExecResult, error) {
	s.mu.Lock()
	workdir, w := s.workdir, s.watch
	s.mu.Unlock()
	res := sandbox.ExecResult{Shell: s.shell}

	release := holdStart()
	defer release()
	cred, env, err := s.startUser(req.User)
	if err != nil {
		return res, err
	}
	pipes := userPipes{cred: cred}
	defer pipes.closeAll()
	cmdR, cmdW := pipes.pipe("command")
	outR, outW := pipes.pipe("stdout")
	errR, errW := pipes.pipe("stderr")
	var stdinR, stdinW *os.File
	if req.Stdin {
		stdinR, stdinW = pipes.pipe("stdin")
	}
	if pipes.err != nil {
		return res, pipes.err
	}
	dir := workdir
	if _, err := os.Stat(workdir); err != nil {
		dir = "/"
	}
	cmd := bootstrapShell(s.shellBin, s.shell, cred, env, dir)
	cmd.Stdout, cmd.Stderr = outW, errW
	if stdinR != nil {
		cmd.Stdin = stdinR
	}
	cmd.ExtraFiles = []*os.File{cmdR}

	var sub *watchSub
	if w != nil && w.active() {
		sub = w.subscribe(true)
	}
	s.active.Add(1)
	defer func() {
		s.touch()
		s.active.Add(-1)
	}()
	t0 := time.Now()
	if err := startCmd(s.nest, cmd); err != nil {
		if sub != nil {
			w.drain(sub)
		}
		if errors.Is(err, syscall.EAGAIN) {
			// No shell could start: the pids limit is full. Answer as
			// Exec does (bash's words on stderr, exit 126), as a stream
			// that ended at once, with no process to signal (pid 0).
			s.log.Debug("stream: no room for a shell", "err", err)
			emit(response{More: true, PID: 0})
			emit(response{More: true, Stream: sandbox.Stderr, Data: []byte(forkFailedOutput)})
			res.ExitCode, res.Output = forkFailedExit, forkFailedOutput
			res.TotalBytes, res.Duration = int64(len(forkFailedOutput)), time.Since(t0)
			return res, nil
		}
		return res, fmt.Errorf("start %s: %w", s.shellBin, err)
	}
	pgid := cmd.Process.Pid
	s.trackPgid(pgid)
	for _, f := range []*os.File{cmdR, outW, errW, stdinR} {
		if f != nil {
			f.Close()
		}
	}
	release()
	// The shell sources its command from fd 3 and closes it first, so
	// what the command starts does not hold the pipe.
	go writeAndClose(cmdW, "exec 3<&-\n"+req.Command+"\n")
	p := &sproc{pgid: pgid, stdin: stdinW}
	pipes.keep() // stdinW is p's now; the others are closed below
	started(p)
	emit(response{More: true, PID: pgid})

	out := newCapBuffer(req.MaxOutput)
	var omu sync.Mutex // orders the two readers' chunks in out and on the wire alike
	var readers sync.WaitGroup
	for _, r := range []struct {
		f    *os.File
		name string
	}{{outR, sandbox.Stdout}, {errR, sandbox.Stderr}} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			streamPipe(r.f, func(b []byte) {
				omu.Lock()
				out.Write(b)
				emit(response{More: true, Stream: r.name, Data: append([]byte(nil), b...)})
				omu.Unlock()
			})
		}()
	}

	waitCh := make(chan error, 1)
	go func() { waitCh <- waitCmd(cmd) }()
	hard := time.NewTimer(callTimeout(req.Timeout))
	defer hard.Stop()
	var waitErr error
	select {
	case waitErr = <-waitCh:
	case <-hard.C:
		res.Stopped = sandbox.StopTimeout
	case <-ctx.Done():
		res.Stopped = StopCancelled
	}
	if res.Stopped != "" {
		syscall.Kill(-pgid, syscall.SIGKILL)
		waitErr = <-waitCh
	}
	p.mu.Lock()
	p.exited = true
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
	p.mu.Unlock()
	res.Duration = time.Since(t0)
	// What the shell wrote is in the pipes; what it left running in the
	// background may hold them open, so wait only briefly for it.
	deadline := time.Now().Add(drainAfterExit)
	outR.SetReadDeadline(deadline)
	errR.SetReadDeadline(deadline)
	readers.Wait()
	if sub != nil {
		w.drain(sub)
		res.CanaryOpens, res.Effects, res.EffectsTruncated = sub.opens, sub.effects, sub.truncated
	}
	res.ExitCode = exitCode(cmd.ProcessState, waitErr)
	omu.Lock()
	out.fill(&res)
	omu.Unlock()
	s.log.Debug("stream", "pid", pgid, "exit", res.ExitCode, "stopped", res.Stopped, "bytes", res.TotalBytes, "duration", res.Duration)
	return res, nil
}

// streamPipe hands r's chunks to write until EOF or the read deadline;
// then it drains what the pipe holds and goes on discarding in the
// background, so a process still writing does not die of EPIPE.
func streamPipe(r *os.File, write func([]byte)) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			write(buf[:n])
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			drainNow(r, write)
			r.SetReadDeadline(time.Time{})
			go func() {
				defer r.Close()
				for {
					if _, err := r.Read(buf); err != nil {
						return
					}
				}
			}()
			return
		}
		r.Close()
		return
	}
}
