package agent

import (
	"fmt"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// Version is the protocol and agent version reported by Ping.
const Version = "rollcage-agent/1"

// Ops of the protocol.
const (
	opConfigure = "configure"
	opExec      = "exec"
	opReadFile  = "read_file"
	opWriteFile = "write_file"
	opCopyIn    = "copy_in"
	opCopyOut   = "copy_out"
	opPing      = "ping"
	opShutdown  = "shutdown"
	opCancel    = "cancel"
	// opStart starts a streamed command: its answer is a run of frames
	// with More set (the pid first, then output chunks) and then a final
	// one with the ExecResult. opInput and opSignal act on it by Target.
	opStart  = "start"
	opInput  = "input"
	opSignal = "signal"
	// opTunnel listens on an abstract unix socket in the sandbox (Path)
	// and carries each connection made there to the host (tunnel.go);
	// opTunnelData is the host's side of one connection, unanswered.
	opTunnel     = "tunnel"
	opTunnelData = "tunnel_data"
	// opKillAll kills every process of the sandbox but the agent's own,
	// without forking (killall.go); Timeout bounds it.
	opKillAll = "kill_all"
)

// Error codes of the protocol.
const (
	codeNotFound   = "not_found"
	codeRefused    = "refused" // a sandbox.PathError: Kind, Path and Message say which
	codeClosed     = "closed"
	codeBadRequest = "bad_request"
	codeInternal   = "internal"
)

// StopCancelled is the ExecResult.Stopped reason of an Exec killed by a
// cancel op. Such results are never cached for RequestID dedupe, so a retry
// runs the command again.
const StopCancelled = "cancelled"

// Config is what the host tells the agent after the container starts.
type Config struct {
	// Workdir is where new sessions start. Empty: the server's default.
	Workdir string `json:"workdir"`
	// Env is added to every session's environment (over the defaults).
	Env map[string]string `json:"env,omitempty"`
	// Canaries are planted (root-owned, 0644, parents created) and watched.
	Canaries []sandbox.Canary `json:"canaries,omitempty"`
	// Watch starts the effect watch (nil: none). Effects come back in each
	// ExecResult; an agent that predates them leaves them empty.
	Watch *sandbox.Watch `json:"watch,omitempty"`
	// Root, when set, is a directory the agent changes its root to before
	// anything else (chroot, then cd /): a fork's file system that the host
	// mounted into a warm sandbox. Only before the first session; an agent
	// without CAP_SYS_CHROOT refuses it.
	Root string `json:"root,omitempty"`
}

// Info is what Ping reports.
type Info struct {
	Version string        `json:"version"`
	Shell   string        `json:"shell"` // "bash" or "sh"
	PID     int           `json:"pid"`
	Uptime  time.Duration `json:"uptime_ns"`
}

// request is one frame from the host. Only the fields of its op are set.
type request struct {
	ID     uint64                `json:"id"`
	Op     string                `json:"op"`
	Config *Config               `json:"config,omitempty"`
	Exec   *sandbox.ExecRequest  `json:"exec,omitempty"`
	Start  *sandbox.StartRequest `json:"start,omitempty"`
	Path   string                `json:"path,omitempty"`
	Max    int64                 `json:"max,omitempty"`
	Data   []byte                `json:"data,omitempty"` // base64 in JSON
	Mode   uint32                `json:"mode,omitempty"`
	Target uint64                `json:"target,omitempty"` // id of the request a cancel, input or signal is for
	// Signal is the signal number of an opSignal; CloseInput closes the
	// stdin of an opInput's process after writing Data.
	Signal     int  `json:"signal,omitempty"`
	CloseInput bool `json:"close_input,omitempty"`
	// Conn, Ack and Close are an opTunnelData's: the connection, the
	// bytes of it the host delivered, and its end.
	Conn  uint64 `json:"conn,omitempty"`
	Ack   int    `json:"ack,omitempty"`
	Close bool   `json:"close,omitempty"`
	// User is who an opWriteFile writes as, by name (a root sandbox's
	// users); empty: the sandbox user.
	User string `json:"user,omitempty"`
	// Timeout is what is left of the caller's deadline for a file op; the
	// agent gives up at it even if the cancel never arrives. Zero: none.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
}

// response is one frame from the agent, answering the request with the same id.
type response struct {
	ID        uint64              `json:"id"`
	Error     *wireError          `json:"error,omitempty"`
	Exec      *sandbox.ExecResult `json:"exec,omitempty"`
	Data      []byte              `json:"data,omitempty"`
	Truncated bool                `json:"truncated,omitempty"`
	Info      *Info               `json:"info,omitempty"`
	Kill      *KillResult         `json:"kill,omitempty"`
	// More marks a frame of a streamed command that is not its last:
	// the first carries PID, the others Stream and Data.
	More   bool   `json:"more,omitempty"`
	PID    int    `json:"pid,omitempty"`
	Stream string `json:"stream,omitempty"`
	// Conn and Ack are a tunnel frame's (Stream is then its kind): the
	// connection, and the bytes of it the agent delivered.
	Conn uint64 `json:"conn,omitempty"`
	Ack  int    `json:"ack,omitempty"`
}

// wireError is an error as it crosses the connection.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Kind and Path are set for a sandbox.PathError (codes not_found and
	// refused); Message is then its Reason.
	Kind string `json:"kind,omitempty"`
	Path string `json:"path,omitempty"`
}

func (e *wireError) Error() string { return e.Code + ": " + e.Message }

// err maps a wire error to the sandbox sentinels, so callers match with
// errors.Is regardless of the transport.
func (e *wireError) err(op string) error {
	if e.Kind != "" && (e.Code == codeNotFound || e.Code == codeRefused) {
		return fmt.Errorf("agent %s: %w", op, &sandbox.PathError{Op: fileOp(op), Path: e.Path, Kind: e.Kind, Reason: e.Message})
	}
	switch e.Code {
	case codeNotFound:
		return fmt.Errorf("agent %s: %s: %w", op, e.Message, sandbox.ErrNotFound)
	case codeClosed:
		return fmt.Errorf("agent %s: %s: %w", op, e.Message, sandbox.ErrClosed)
	default:
		return fmt.Errorf("agent %s: %s: %s: %w", op, e.Code, e.Message, sandbox.ErrAgent)
	}
}

// fileOp names a protocol op the way a PathError does.
func fileOp(op string) string {
	switch op {
	case opReadFile:
		return "read"
	case opWriteFile:
		return "write"
	}
	return op
}
