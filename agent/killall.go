package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// KillResult is what KillAll reports.
type KillResult struct {
	// Rounds is how many sweeps of kill(-1, SIGKILL) ran.
	Rounds int `json:"rounds"`
	// Survivors are the processes still alive (zombies aside: they run
	// nothing) when KillAll gave up at its deadline; none when it is
	// done.
	Survivors []Survivor `json:"survivors,omitempty"`
}

// Survivor is a process KillAll could not kill in time.
type Survivor struct {
	PID   int    `json:"pid"`
	UID   int    `json:"uid"`
	State string `json:"state"` // as in /proc/PID/stat: R, S, D, T, ...
	Comm  string `json:"comm"`
}

// DefaultKillTimeout bounds KillAll when the caller's context has no
// deadline.
const DefaultKillTimeout = 5 * time.Second

// killRoundGap is the pause between sweeps: long enough for SIGKILLed
// processes to exit, short against a submit's budget.
const killRoundGap = 10 * time.Millisecond

// notSandboxAgent says why kill(-1) is refused: it is safe only in the
// sandbox's own pid namespace, under the agent's own reaper.
const notSandboxAgent = "agent is not under its own reaper at PID 1 of the sandbox's pid namespace, so kill(-1) would reach processes outside the sandbox"

// killAll kills every process of the sandbox but the agent and its
// reaper, whatever their uid, without starting a process or a thread:
// kill(-1, SIGKILL) from root in the sandbox's pid namespace reaches every
// process of the namespace but PID 1 (the reaper) and the caller, in one
// sweep the kernel makes under its task list lock, so a fork cannot slip
// past it. Sweeps repeat until no process but zombies is left (a process
// killed mid-fork can leave a child), or ctx ends; what is left is
// reported, not an error. Session shells die too: the next Exec starts a
// fresh one.
func (s *Server) killAll(ctx context.Context) (KillResult, error) {
	if err := sandboxNamespace(); err != nil {
		return KillResult{}, err
	}
	self := os.Getpid()
	var res KillResult
	for {
		res.Rounds++
		if err := unix.Kill(-1, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return res, fmt.Errorf("kill(-1): %w", err)
		}
		left, err := liveProcesses(self)
		if err != nil {
			return res, err
		}
		if len(left) == 0 {
			return res, nil
		}
		select {
		case <-ctx.Done():
			res.Survivors = left
			return res, nil
		case <-time.After(killRoundGap):
		}
	}
}

// sandboxNamespace checks that kill(-1) from here stays in a sandbox:
// this process's parent is PID 1 and PID 1 runs this very executable (the
// agent's reaper, cmd/rollcage-agent), which only a sandbox's pid
// namespace has. Anywhere else (a test on the host, an agent started by
// hand) it refuses.
func sandboxNamespace() error {
	if os.Getppid() != 1 {
		return badRequest("kill_all refused: %s (its parent is pid %d)", notSandboxAgent, os.Getppid())
	}
	self, err := os.Stat("/proc/self/exe")
	if err != nil {
		return badRequest("kill_all refused: %s (%v)", notSandboxAgent, err)
	}
	init, err := os.Stat("/proc/1/exe")
	if err != nil || !os.SameFile(self, init) {
		return badRequest("kill_all refused: %s (PID 1 runs another program)", notSandboxAgent)
	}
	return nil
}

// liveProcesses lists the processes in /proc but PID 1, self and zombies.
func liveProcesses(self int) ([]Survivor, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []Survivor
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == 1 || pid == self {
			continue
		}
		p, ok := readProc(pid)
		if !ok || p.State == "Z" || p.State == "X" {
			continue // gone meanwhile, or dead and waiting to be reaped
		}
		out = append(out, p)
	}
	return out, nil
}

// readProc reads a process's state, command and owner; false when it is
// gone.
func readProc(pid int) (Survivor, bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return Survivor{}, false
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open || end+3 > len(b) {
		return Survivor{}, false
	}
	p := Survivor{PID: pid, Comm: string(b[open+1 : end]), State: string(b[end+2 : end+3]), UID: -1}
	if fi, err := os.Stat(dir); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			p.UID = int(st.Uid)
		}
	}
	return p, true
}
