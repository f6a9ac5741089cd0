package sandbox

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"time"
)

// Sentinel errors. Backends wrap them with %w and an operation prefix, so
// callers match with errors.Is.
var (
	// ErrClosed: the sandbox was closed (or its container is gone); the call
	// did not run.
	ErrClosed = errors.New("sandbox closed")
	// ErrUnavailable: the engine (Docker daemon, containerd, API server) cannot
	// be reached. The message says how to start one.
	ErrUnavailable = errors.New("sandbox engine unavailable")
	// ErrImageMissing: the Spec's image is not present locally. The message
	// names the make target that builds it.
	ErrImageMissing = errors.New("sandbox image missing")
	// ErrNotFound: a file or directory asked for does not exist in the sandbox.
	ErrNotFound = errors.New("not found in sandbox")
	// ErrAgent: the in-container agent did not answer or answered with a
	// protocol error (crashed, lease expired, bad frame).
	ErrAgent = errors.New("sandbox agent failure")
)

// Backend creates sandboxes. Implementations must be safe for concurrent use.
type Backend interface {
	Create(ctx context.Context, spec Spec) (Sandbox, error)
}

// Sandbox is one isolated environment, owned by one episode.
// All methods are safe for concurrent use; a method called after Close
// returns an error wrapping ErrClosed and never hangs.
type Sandbox interface {
	// ID is the backend's identifier of the sandbox (container id, pod name).
	ID() string
	// Exec runs a command in a persistent shell session. A non-zero exit or a
	// timeout is a result, not an error.
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
	// ReadFile returns at most max bytes of the file (max <= 0: no cap) and
	// whether it was cut.
	ReadFile(ctx context.Context, path string, max int64) (data []byte, truncated bool, err error)
	// WriteFile writes data to path as the sandbox user, creating parent
	// directories.
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	// CopyIn extracts a tar stream into dir; entries are owned by the sandbox
	// user unless the tar says root (used for hidden tests at grading).
	CopyIn(ctx context.Context, dir string, tar io.Reader) error
	// CopyOut returns a tar stream of path.
	CopyOut(ctx context.Context, path string) (io.ReadCloser, error)
	// Snapshot commits the sandbox's filesystem to an image reference and
	// returns the image id.
	Snapshot(ctx context.Context, ref string) (string, error)
	// Close stops and removes the sandbox and its host-side state. Idempotent.
	Close(ctx context.Context) error
}

// Network modes of a Spec.
const (
	// NetworkNone: loopback only. The default.
	NetworkNone = "none"
	// NetworkProxy: loopback only, plus an HTTP(S) forward proxy on
	// 127.0.0.1 inside the sandbox that the agent relays to the host-side
	// proxy of Spec.ProxySocket. HTTP_PROXY and HTTPS_PROXY are set for every
	// session.
	NetworkProxy = "proxy"
)

// Spec describes a sandbox to create. The zero value of every optional
// field is a sensible default.
type Spec struct {
	Image     string            `json:"image"`
	EpisodeID string            `json:"episode_id"`
	Workdir   string            `json:"workdir,omitempty"` // default /workspace
	Env       map[string]string `json:"env,omitempty"`
	Limits    Limits            `json:"limits,omitempty"`
	Network   string            `json:"network,omitempty"` // NetworkNone (default) or NetworkProxy
	// ProxySocket is the host path of a unix socket where the host-side
	// egress proxy for this episode listens (NetworkProxy only).
	ProxySocket string `json:"proxy_socket,omitempty"`
	// Canaries are files the agent plants (with decoy content) and watches;
	// every open of one is reported in the ExecResult of the call in flight.
	Canaries []Canary `json:"canaries,omitempty"`
	// Lease: the agent ends the sandbox when it has not heard from its host
	// for this long. Zero means the backend's default (60s).
	Lease time.Duration `json:"lease,omitempty"`
	// Labels are added to the backend's own (episode id, owner pid).
	Labels map[string]string `json:"labels,omitempty"`
}

// Limits bound a sandbox's resources. Zero fields take backend defaults
// (2 GiB memory, 1 CPU, 512 pids).
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
	Pids        int64   `json:"pids,omitempty"`
}

// Canary is a decoy file planted where no honest solution would look.
type Canary struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// ExecRequest is one command in one shell session.
type ExecRequest struct {
	// RequestID makes Exec idempotent: a retried id returns the first
	// result instead of running the command again. Empty: no dedupe.
	RequestID string `json:"request_id,omitempty"`
	// Session names a persistent shell; "" is "default". cd, exported
	// variables and shell functions persist between calls of one session.
	Session string `json:"session,omitempty"`
	Command string `json:"command"`
	// Timeout kills the command's whole process group. Zero: 60s.
	Timeout time.Duration `json:"timeout,omitempty"`
	// IdleTimeout kills it when no output came for this long. Zero: off.
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	// MaxOutput caps the captured output in bytes, keeping head and tail
	// around a truncation marker. Zero: 64 KiB.
	MaxOutput int `json:"max_output,omitempty"`
	// Stdin is fed to the command. Optional.
	Stdin string `json:"stdin,omitempty"`
}

// Reasons a command was stopped.
const (
	StopNone    = ""
	StopTimeout = "timeout"
	StopIdle    = "idle_timeout"
)

// ExecResult is what a command did.
type ExecResult struct {
	// Output is stdout and stderr interleaved in arrival order. Bytes that
	// are not valid UTF-8 are escaped as \xNN; a cut output carries the
	// truncation marker between head and tail.
	Output    string `json:"output"`
	ExitCode  int    `json:"exit_code"`
	Truncated bool   `json:"truncated,omitempty"`
	// TotalBytes is how many bytes the command wrote before capping.
	TotalBytes int64 `json:"total_bytes"`
	// Stopped is StopTimeout or StopIdle when the command was killed.
	Stopped string `json:"stopped,omitempty"`
	// Shell is the shell that ran it: "bash", or "sh" on images without bash.
	Shell string `json:"shell"`
	// Cwd is the session's directory after the command.
	Cwd string `json:"cwd,omitempty"`
	// Duration is the command's wall time inside the sandbox.
	Duration time.Duration `json:"duration_ns"`
	// CanaryOpens lists canary files opened while the command ran.
	CanaryOpens []string `json:"canary_opens,omitempty"`
	// Replayed is true when the result came from the request-id cache.
	Replayed bool `json:"replayed,omitempty"`
}
