package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The agent shares the sandbox's pids limit with the policy's processes:
// every OS thread of the agent is a task the limit counts. A policy that
// fills the limit (a fork bomb, or just many background jobs) leaves no
// room for a new thread, and the Go runtime does not fail a thread it
// cannot make: it throws, and the agent, the sandbox and the episode die
// with it. So the agent never needs a new thread while it serves:
//
//   - file operations run on a few threads with the sandbox user's
//     credentials, made at start and kept (userThreads), not on a thread
//     made per call and thrown away;
//   - a child process is waited for through its pidfd in the runtime's
//     poller (waitCmd), not by a thread blocked in waitid for the child's
//     whole life;
//   - spare threads are made at start (ReserveThreads), so the runtime
//     has idle threads to hand a processor to when a syscall blocks.

// errThreadsClosed is returned by a file operation after the server shut
// down.
var errThreadsClosed = errors.New("agent is shutting down")

// userThreads runs functions on OS threads whose filesystem uid and gid are
// the sandbox user's and whose supplementary groups are dropped. Changing
// the fsuid away from 0 also drops the thread's file capabilities
// (DAC_OVERRIDE, FOWNER, ...). The threads stay locked to their goroutines
// for good, so the runtime never schedules anything else on a thread with
// foreign credentials; they end (and are thrown away) only at close.
type userThreads struct {
	work chan userJob
	stop chan struct{}
	once sync.Once
	err  error // why the threads could not be made; returned by every do
}

type userJob struct {
	fn   func() error
	done chan error
}

// userThreadCount is how many file operations run at once as the sandbox
// user. Reads and writes are bounded by their context between chunks, so a
// few threads serve many calls.
const userThreadCount = 4

func startUserThreads(cred *syscall.Credential, n int) *userThreads {
	ut := &userThreads{work: make(chan userJob), stop: make(chan struct{})}
	ready := make(chan error, n)
	for range n {
		go ut.run(cred, ready)
	}
	for range n {
		if err := <-ready; err != nil && ut.err == nil {
			ut.err = err
		}
	}
	if ut.err != nil {
		ut.close()
	}
	return ut
}

func (ut *userThreads) run(cred *syscall.Credential, ready chan<- error) {
	// Never unlocked: returning while locked makes the runtime end the
	// thread instead of reusing it.
	runtime.LockOSThread()
	if err := unix.Setgroups(nil); err != nil {
		ready <- fmt.Errorf("drop groups: %w", err)
		return
	}
	unix.Setfsgid(int(cred.Gid))
	unix.Setfsuid(int(cred.Uid))
	if got, _ := unix.SetfsuidRetUid(-1); got != int(cred.Uid) {
		ready <- fmt.Errorf("switch to uid %d failed (agent lacks CAP_SETUID?)", cred.Uid)
		return
	}
	ready <- nil
	for {
		select {
		case j := <-ut.work:
			j.done <- j.fn()
		case <-ut.stop:
			return
		}
	}
}

// do runs fn on one of the threads and returns its error.
func (ut *userThreads) do(fn func() error) error {
	if ut.err != nil {
		return ut.err
	}
	done := make(chan error, 1)
	select {
	case ut.work <- userJob{fn: fn, done: done}:
		return <-done
	case <-ut.stop:
		return errThreadsClosed
	}
}

func (ut *userThreads) close() { ut.once.Do(func() { close(ut.stop) }) }

// waitCmd is cmd.Wait without an OS thread blocked for the child's life:
// it waits for the child to exit on a pidfd in the runtime's poller, and
// only then calls cmd.Wait, which reaps the zombie at once. Where pidfds
// are missing (kernels before 5.10) it falls back to cmd.Wait.
func waitCmd(cmd *exec.Cmd) error {
	if cmd.Process != nil {
		// An error (no pidfds, already reaped) leaves it to cmd.Wait.
		_ = waitExited(cmd.Process.Pid)
	}
	return cmd.Wait()
}

// waitExited returns once process pid (a child of ours) has exited,
// leaving it to be reaped.
func waitExited(pid int) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			return false
		case err != nil:
			werr = err // ECHILD: already reaped; the caller's Wait says so
			return true
		}
		// WNOHANG with nothing to report leaves the siginfo's pid zero.
		return siginfoPid(&info) != 0
	})
	if err != nil {
		return err
	}
	return werr
}

// siginfoPid is si_pid of a waitid answer: on 64-bit Linux the first int32
// of the union, after si_signo, si_errno, si_code and 4 bytes of padding.
func siginfoPid(info *unix.Siginfo) int32 {
	return *(*int32)(unsafe.Add(unsafe.Pointer(info), 16))
}

// starts bounds how many process starts (pipes, fork, exec) and tar copies
// run at once. Each holds an OS thread in syscalls for a while, and the
// spare threads (ReserveThreads) must outnumber what can block at once.
var starts = make(chan struct{}, maxStarts)

const maxStarts = 4

// holdStart waits for a turn to start a process or copy a tree and returns
// the function that gives it back (idempotent).
func holdStart() (release func()) {
	starts <- struct{}{}
	var once sync.Once
	return func() { once.Do(func() { <-starts }) }
}

// ReserveThreads makes the runtime create n more OS threads now and keep
// them idle, so later blocking syscalls find a thread without making one.
// It locks n goroutines to n distinct threads at once, then lets them go;
// the runtime keeps idle threads for good. Call it at start, while the
// pids limit has room.
func ReserveThreads(n int) {
	var locked, release sync.WaitGroup
	locked.Add(n)
	release.Add(1)
	var done sync.WaitGroup
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			locked.Done()
			release.Wait() // parks this thread; the next goroutine needs another
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	release.Done()
	done.Wait()
}

// SpareThreads is how many idle threads to reserve under the pids limit
// this process lives under: a quarter of the limit, 4 to 32, or 32 when no
// limit can be read. The backends add room for them (and the agent's own
// threads) on top of the policy's Limits.Pids.
func SpareThreads() int {
	limit := pidsMax()
	if limit <= 0 {
		return 32
	}
	return min(max(limit/4, 4), 32)
}

// pidsMax reads the pids limit of this process's cgroup (v2, then v1);
// 0 when there is none or it cannot be read.
func pidsMax() int {
	for _, p := range []string{"/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return 0 // "max"
		}
		return n
	}
	return 0
}
