package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"syscall"
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
	// ErrRefused: a file operation failed for a reason of the caller's own
	// making (see PathError): an answer for the policy, not a fault.
	ErrRefused = errors.New("refused by the sandbox")
	// ErrUnsupported: the backend cannot do this (a capability it lacks:
	// a sandbox that is no Forker asked to fork, a Fork on an engine setup
	// it cannot fork on). The message says what it needs.
	ErrUnsupported = errors.New("not supported by this sandbox backend")
	// ErrDiskLimit: the orchestrator ended the sandbox because it wrote
	// past Limits.DiskBytes (DiskEviction: a Kubernetes pod evicted past
	// its ephemeral-storage limit). The policy's doing, not a fault of
	// the sandbox; the sandbox is gone.
	ErrDiskLimit = errors.New("sandbox ended past its disk limit")
)

// Kinds of PathError.
const (
	KindNotFound   = "not_found"   // no such file or directory
	KindPermission = "permission"  // the sandbox user may not do this
	KindIsDir      = "is_dir"      // a directory where a file is needed
	KindNotDir     = "not_dir"     // a file where a directory is needed
	KindNotRegular = "not_regular" // a FIFO, device or socket
	KindTooLarge   = "too_large"   // over what one call may read
	KindNoSpace    = "no_space"    // the disk limit (or the disk) is full
	KindReadOnly   = "read_only"   // a read-only file system
	KindBadPath    = "bad_path"    // a name too long, a symlink loop, ...
)

// PathError is a file operation that failed because of what the caller
// asked or did earlier: the path does not exist, is a directory or no
// regular file, the sandbox user may not touch it, the disk limit is
// reached. It is the tool's answer to the policy, never a fault of the
// sandbox, so it must not end an episode as infrastructure. It wraps
// ErrNotFound for KindNotFound and ErrRefused for every other kind.
type PathError struct {
	Op   string `json:"op"` // "read", "write"
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Reason is what a shell prints for it: "Permission denied",
	// "Is a directory", "not a regular file (a FIFO)".
	Reason string `json:"reason"`
}

func (e *PathError) Error() string { return e.Op + " " + e.Path + ": " + e.Reason }

func (e *PathError) Unwrap() error {
	if e.Kind == KindNotFound {
		return ErrNotFound
	}
	return ErrRefused
}

// ErrnoKind says whether err, from a file operation, carries an errno the
// caller caused (no such file, permission, a directory, a full disk, ...):
// its PathError kind and its text as a shell prints it. Any other error
// is the host's fault (ok false).
func ErrnoKind(err error) (kind, reason string, ok bool) {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return "", "", false
	}
	if kind, ok = errnoKind[errno]; !ok {
		return "", "", false
	}
	// Go's errno text is glibc's, lower-cased; bash and coreutils print
	// it capitalized.
	reason = errno.Error()
	if reason != "" {
		reason = strings.ToUpper(reason[:1]) + reason[1:]
	}
	return kind, reason, true
}

var errnoKind = map[syscall.Errno]string{
	syscall.ENOENT:       KindNotFound,
	syscall.EACCES:       KindPermission,
	syscall.EPERM:        KindPermission,
	syscall.EISDIR:       KindIsDir,
	syscall.ENOTDIR:      KindNotDir,
	syscall.ENOSPC:       KindNoSpace,
	syscall.EDQUOT:       KindNoSpace,
	syscall.EFBIG:        KindTooLarge,
	syscall.EROFS:        KindReadOnly,
	syscall.ENAMETOOLONG: KindBadPath,
	syscall.ELOOP:        KindBadPath,
	syscall.EEXIST:       KindBadPath,
	syscall.ETXTBSY:      KindBadPath,
	syscall.EINVAL:       KindBadPath,
}

// Backend creates sandboxes. Implementations must be safe for concurrent use.
type Backend interface {
	Create(ctx context.Context, spec Spec) (Sandbox, error)
}

// Stats is a point-in-time view of a backend's sandboxes, for metrics;
// every backend's Stats method returns one.
type Stats struct {
	Creating int // sandboxes being created and started now
	Alive    int // sandboxes alive, warm ones included
	Warm     int // warm sandboxes ready to hand out
	// ForkedWarm counts the fork children made from warm sandboxes
	// (adopted: nothing started for them) since the backend started;
	// always 0 on a backend that cannot fork.
	ForkedWarm int64
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
	// ReadFile returns at most max bytes of a regular file (max <= 0: the
	// whole file, up to the backend's bound) and whether it was cut. What
	// the caller caused (a directory, a FIFO, permission denied, too large)
	// is a *PathError; it never blocks past ctx.
	ReadFile(ctx context.Context, path string, max int64) (data []byte, truncated bool, err error)
	// WriteFile writes data to a regular file at path as the sandbox user,
	// creating parent directories. What the caller caused is a *PathError.
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	// CopyIn extracts a tar stream into dir; entries are owned by the sandbox
	// user unless the tar says root (used for hidden tests at grading).
	CopyIn(ctx context.Context, dir string, tar io.Reader) error
	// CopyOut returns a tar stream of path.
	CopyOut(ctx context.Context, path string) (io.ReadCloser, error)
	// Close stops and removes the sandbox and its host-side state. Idempotent.
	Close(ctx context.Context) error
}

// What a sandbox may do besides, each an interface of its own that a
// caller checks for at run time, as net/http's Flusher: Forker,
// Snapshotter, Streamer (stream.go) and ProcessKiller; a backend may be a
// Sealer (seal.go). A caller that needs one a sandbox lacks fails with an
// error wrapping ErrUnsupported.

// Forker is a sandbox that forks. Fork makes n new sandboxes whose
// filesystem is this one's at one instant and whose shell sessions start
// from this one's state (cwd, exported variables, functions, shell
// options). The parent is frozen only while its changes are copied and
// goes on afterwards. Running processes are not carried
// (ForkResult.NotCarried lists them). The children have the parent's
// spec (limits, labels, lease) under their own episode ids; closing them
// is the caller's business. Do not run a call in the parent while it
// forks. An engine setup it cannot fork on is an error wrapping
// ErrUnsupported.
type Forker interface {
	Fork(ctx context.Context, n int) (ForkResult, error)
}

// Snapshotter is a sandbox that commits its filesystem to an image
// reference and returns the image id.
type Snapshotter interface {
	Snapshot(ctx context.Context, ref string) (string, error)
}

// Fork forks sb when it is a Forker; else it returns an error wrapping
// ErrUnsupported.
func Fork(ctx context.Context, sb Sandbox, n int) (ForkResult, error) {
	f, ok := sb.(Forker)
	if !ok {
		return ForkResult{}, fmt.Errorf("sandbox %s: fork: %T cannot fork: %w", sb.ID(), sb, ErrUnsupported)
	}
	return f.Fork(ctx, n)
}

// Snapshot commits sb to ref when it is a Snapshotter; else it returns an
// error wrapping ErrUnsupported.
func Snapshot(ctx context.Context, sb Sandbox, ref string) (string, error) {
	s, ok := sb.(Snapshotter)
	if !ok {
		return "", fmt.Errorf("sandbox %s: snapshot: %T cannot snapshot: %w", sb.ID(), sb, ErrUnsupported)
	}
	return s.Snapshot(ctx, ref)
}

// MaxFork bounds the children of one Fork call.
const MaxFork = 64

// ForkResult is what a Fork made.
type ForkResult struct {
	// Children are the new sandboxes, in order. Their episode ids are the
	// parent's with ".fork<k>" appended (k from 1) unless the caller
	// renames them in its own records.
	Children []Sandbox `json:"-"`
	// Paused is how long the parent was frozen.
	Paused time.Duration `json:"paused_ns"`
	// Duration is the whole fork, until every child was ready.
	Duration time.Duration `json:"duration_ns"`
	// ChangedBytes is the size of the parent's changes copied into each
	// child (its writable layer: files it wrote, not the image).
	ChangedBytes int64 `json:"changed_bytes"`
	// Sessions are the shell sessions whose state the children got.
	Sessions []string `json:"sessions,omitempty"`
	// NotCarried are the command lines of the sandbox user's processes
	// running in the parent at the fork (servers, jobs left in the
	// background): the children do not have them.
	NotCarried []string `json:"not_carried,omitempty"`
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

// Users of a Spec: who the policy's commands run as.
const (
	// UserDefault: the sandbox user, uid 1000 with no capabilities.
	UserDefault = ""
	// UserRoot: root inside a user namespace of its own (uid 0 there is an
	// unprivileged uid on the host), with the agent and its watches beyond
	// that root's reach. Only a backend that can map users gives it; the
	// others refuse the spec with an error wrapping ErrUnsupported that
	// says why.
	UserRoot = "root"
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
	// Watch says which file effects the agent reports with each call. Nil:
	// none are watched.
	Watch *Watch `json:"watch,omitempty"`
	// Lease: the agent ends the sandbox when it has not heard from its host
	// for this long. Zero means the backend's default (60s).
	Lease time.Duration `json:"lease,omitempty"`
	// Labels are added to the backend's own (episode id, owner pid).
	Labels map[string]string `json:"labels,omitempty"`
	// User is UserDefault or UserRoot.
	User string `json:"user,omitempty"`
}

// Limits bound a sandbox's resources. Zero fields take backend defaults
// (2 GiB memory, 1 CPU, 512 pids, 10 GiB disk).
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
	// Pids bounds the policy's processes and threads. The backends give
	// the agent its own room on top (hostside.AgentPids), so a policy that
	// fills its share still leaves the agent the threads it serves with.
	Pids int64 `json:"pids,omitempty"`
	// DiskBytes bounds what the sandbox may write to its filesystem (the
	// container's writable layer, /tmp included). Reaching it is an error
	// the policy sees (ENOSPC or EDQUOT where the kernel holds it, a
	// stopped call saying so under the watchdog); what holds it is the
	// sandbox's DiskGuard.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
}

// DiskGuard says what holds a sandbox to Limits.DiskBytes.
type DiskGuard string

const (
	// DiskKernel: the kernel refuses a write past the limit (ENOSPC or
	// EDQUOT to the writer): plain writes, unlinked-but-open files,
	// preallocation, deep paths and file metadata all count.
	DiskKernel DiskGuard = "kernel"
	// DiskWatchdog: a host-side walk of the writable layer stops calls
	// past the limit, after the fact; unlinked-but-open files, fallocate,
	// paths past PATH_MAX and floods of empty files get past it.
	DiskWatchdog DiskGuard = "watchdog"
	// DiskEviction: the orchestrator evicts the sandbox once it has gone
	// past the limit (Kubernetes ephemeral-storage); the writes land.
	DiskEviction DiskGuard = "eviction"
	// DiskNone: nothing holds the limit.
	DiskNone DiskGuard = "none"
)

// DiskGuarder is a sandbox that says what holds its disk limit.
type DiskGuarder interface {
	DiskGuard() DiskGuard
}

// Canary is a decoy file planted where no honest solution would look.
type Canary struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Watch configures the agent's watch of file effects (inotify). Every
// effect is reported in the ExecResult of the calls running when it
// happened. An effect with no call running (a process a call left in the
// background) is reported with the next call; effects before the first
// call of a session not named "rollcage-…" (the host's own set-up) are
// dropped.
type Watch struct {
	// Roots are directories watched recursively (the workspace): files and
	// directories created, modified, deleted, renamed or chmodded under
	// them. Directories created later are watched as they appear.
	Roots []string `json:"roots,omitempty"`
	// Home adds the sandbox user's home directory to Roots (where a user
	// site-packages directory with a .pth or usercustomize.py would go).
	Home bool `json:"home,omitempty"`
	// Skip are names of directories not descended into under Roots, such
	// as ".git" and "__pycache__". A directory of that name is still
	// reported when it is created or deleted.
	Skip []string `json:"skip,omitempty"`
	// Shallow are directories watched one level deep, plus their
	// subdirectories ending in ".dist-info" or ".egg-info" and every
	// directory created in them later (site-packages: a new *.pth,
	// sitecustomize.py, a package's entry points). Paths may be globs
	// (/usr/local/lib/python3*/dist-packages); missing ones are skipped.
	Shallow []string `json:"shallow,omitempty"`
	// MaxEffects bounds the effects kept per call (distinct path and op);
	// beyond it, and when the kernel's queue overflowed, the call's
	// EffectsTruncated is set. Zero: 1024.
	MaxEffects int `json:"max_effects,omitempty"`
}

// Ops of an Effect: what became of the path.
const (
	EffectCreate = "create" // the path appeared (created, or renamed onto a free name)
	EffectModify = "modify" // its content changed (written, truncated, replaced by a rename)
	EffectDelete = "delete" // it was removed
	EffectRename = "rename" // it was renamed away (gone from this path)
	EffectChmod  = "chmod"  // its permission bits changed
)

// Effect is one thing a call did to the filesystem. Directories carry
// IsDir.
type Effect struct {
	Path  string `json:"path"`
	Op    string `json:"op"`
	IsDir bool   `json:"is_dir,omitempty"`
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
	// Pending asks, for one of rollcage's own sessions, for the effects
	// seen while no call of the policy's ran (a process it left running),
	// and for those during the command, as a policy call gets them.
	Pending bool `json:"pending,omitempty"`
}

// Reasons a command was stopped.
const (
	StopNone    = ""
	StopTimeout = "timeout"
	StopIdle    = "idle_timeout"
	// StopDisk: the sandbox reached its disk limit while the command ran.
	StopDisk = "disk_limit"
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
	// Effects are the file effects seen while the command ran (Spec.Watch),
	// each distinct path and op once, in the order first seen.
	Effects []Effect `json:"effects,omitempty"`
	// EffectsTruncated: effects were lost (more than Watch.MaxEffects, or
	// the kernel's event queue overflowed). What the call did is then
	// partly unknown.
	EffectsTruncated bool `json:"effects_truncated,omitempty"`
	// Replayed is true when the result came from the request-id cache.
	Replayed bool `json:"replayed,omitempty"`
}

// UserWriter is a sandbox that writes a file as one of its users, by
// name: a root sandbox's (E2B's files.write with a user). The file is
// created with that user's uid and primary gid, and the write has that
// user's permissions; a sandbox that is not root refuses a named user.
type UserWriter interface {
	WriteFileAs(ctx context.Context, user, path string, data []byte, mode fs.FileMode) error
}

// ProcessKiller is a sandbox that stops every process in it but its agent
// without starting a process (so a full pid table cannot starve it), by
// the sandbox's pid namespace rather than by uid.
type ProcessKiller interface {
	KillAll(ctx context.Context) (KillResult, error)
}

// KillResult is what KillAll did: how many sweeps it took and the
// processes still alive when it gave up (none when it is done).
type KillResult struct {
	Rounds    int        `json:"rounds"`
	Survivors []Survivor `json:"survivors,omitempty"`
}

// Survivor is a process KillAll could not kill in time.
type Survivor struct {
	PID   int    `json:"pid"`
	UID   int    `json:"uid"`
	State string `json:"state"`
	Comm  string `json:"comm"`
}
