package sandbox

import (
	"context"
	"syscall"
	"time"
)

// Streams of an Output chunk.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Output is one chunk a started process wrote, as it came.
type Output struct {
	Stream string `json:"stream"` // Stdout or Stderr
	Data   []byte `json:"data"`
}

// StartRequest is one command started apart from the shell sessions.
type StartRequest struct {
	// Command is run by a fresh shell (bash, or sh on images without it)
	// in the sandbox's workdir with its base environment: no session's
	// cd, exports or functions apply, and it changes none.
	Command string `json:"command"`
	// Timeout kills the command's process group. Zero: 60s.
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxOutput caps the output kept for the ExecResult (what is
	// recorded); the stream itself carries everything. Zero: 64 KiB.
	MaxOutput int `json:"max_output,omitempty"`
	// Stdin keeps the command's stdin open for Process.Input; otherwise
	// it reads /dev/null.
	Stdin bool `json:"stdin,omitempty"`
	// User runs the command as this user of the image (a name), with its
	// groups and home. Only a root sandbox (Spec.User) runs commands as
	// other users; elsewhere a non-empty User is refused.
	User string `json:"user,omitempty"`
}

// Streamer is a Sandbox that can start commands whose output comes as it
// is written, stdout and stderr apart, several at once, each one taking
// input and signals while it runs. It is optional: callers check for it
// with a type assertion and fall back to Exec.
type Streamer interface {
	// Start starts the command and returns once it runs. out receives
	// its output in order, from one goroutine at a time; it must not
	// block (it holds up the sandbox's connection). ctx bounds the start
	// only: the process runs until it exits, its Timeout, a Signal, or
	// the sandbox's Close.
	Start(ctx context.Context, req StartRequest, out func(Output)) (Process, error)
}

// Process is a command a Streamer started.
type Process interface {
	// PID is the process's id inside the sandbox (the shell's; it leads
	// the process group).
	PID() int
	// Input writes to its stdin (StartRequest.Stdin).
	Input(ctx context.Context, data []byte) error
	// CloseInput closes its stdin.
	CloseInput(ctx context.Context) error
	// Signal sends sig to its process group. A process that ended is no
	// error.
	Signal(ctx context.Context, sig syscall.Signal) error
	// Wait returns what the command did once it ended: the output kept
	// (stdout and stderr interleaved, capped at MaxOutput), the exit
	// code, the file effects and canary opens seen while it ran. A
	// signalled process exits 128+signal. Cancelling ctx stops waiting
	// only.
	Wait(ctx context.Context) (ExecResult, error)
}
