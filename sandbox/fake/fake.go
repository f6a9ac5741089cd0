package fake

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/rollcage/rollcage/sandbox"
)

// ExecFunc answers one command run in sb. It is called without sb's lock
// held, so it may read and set sb's files.
type ExecFunc func(ctx context.Context, sb *Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error)

// Echo answers a command as echo would: the text after "echo " and a
// newline, the shell's directory /workspace. Backend's default for the
// policy's commands.
func Echo(_ context.Context, _ *Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	out, _ := strings.CutPrefix(req.Command, "echo ")
	return sandbox.ExecResult{Output: out + "\n", Shell: "bash", Cwd: "/workspace"}, nil
}

// Backend hands out Sandboxes that answer rollcage's own sessions as a
// clean repository would (the probe, hashing and tool sessions with
// nothing, submission with the change in Diff and Files, grading with
// Passed's verdict) and the policy's commands with Exec. Its zero value
// is an echo shell whose hidden tests pass.
type Backend struct {
	// Exec answers the policy's commands (sessions not named rollcage-*).
	// Nil: Echo.
	Exec ExecFunc
	// Passed decides the grade: the hidden tests pass when it returns true.
	// Nil: they pass.
	Passed func(sb *Sandbox) bool
	// Diff and Files are the change the episode submits: the diff and its
	// name-status list (NUL-separated, as git writes it). Empty: none.
	Diff, Files string
	// CreateErr, when set, fails every Create.
	CreateErr error
	// Check, when set, is asked before each Create, which fails with its
	// error: an image the backend lacks (an error wrapping
	// sandbox.ErrImageMissing, as a real backend answers one not built),
	// a Create that waits for the test to release it.
	Check func(ctx context.Context, spec sandbox.Spec) error
	// Start, when set, makes the sandboxes sandbox.Streamers (Create
	// returns a *Streamer) whose Start it answers. Nil: they do not
	// stream, as a backend without streaming.
	Start StartFunc
	// Dir, when set, is a host directory that holds the sandboxes' files
	// instead of memory: the sandbox's path p is Dir+p, and a host path
	// already below Dir (as a shell run there by Bash spells it) is
	// taken as it is. Every sandbox of the Backend shares it, as
	// processes on one host do, so they cannot fork
	// (sandbox.ErrUnsupported).
	Dir string
	// NoFork makes Fork fail with sandbox.ErrUnsupported, as a backend
	// that cannot fork does.
	NoFork bool

	mu      sync.Mutex
	created []*Sandbox // guarded by mu
}

var _ sandbox.Backend = (*Backend)(nil)

// Create returns a Sandbox with the spec's canaries as its files (a
// *Streamer when Start is set).
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if b.CreateErr != nil {
		return nil, b.CreateErr
	}
	if b.Check != nil {
		if err := b.Check(ctx, spec); err != nil {
			return nil, err
		}
	}
	sb := New(spec, b.exec)
	if b.Dir != "" {
		root, err := filepath.Abs(b.Dir)
		if err != nil {
			return nil, fmt.Errorf("fake create %s: Dir %s: %w", spec.EpisodeID, b.Dir, err)
		}
		sb.files = dirFiles{root: root}
	}
	for _, c := range spec.Canaries {
		if err := sb.files.write(sb.canon(c.Path), []byte(c.Content), 0o644); err != nil {
			return nil, fmt.Errorf("fake create %s: canary %s: %w", spec.EpisodeID, c.Path, err)
		}
	}
	b.add(sb)
	return b.wrap(sb), nil
}

// wrap gives sb the Backend's optional capabilities.
func (b *Backend) wrap(sb *Sandbox) sandbox.Sandbox {
	if b.Start != nil {
		return &Streamer{Sandbox: sb, start: b.Start}
	}
	return sb
}

func (b *Backend) add(sb *Sandbox) {
	sb.b = b
	b.mu.Lock()
	b.created = append(b.created, sb)
	b.mu.Unlock()
}

// Created returns the sandboxes made so far (forks' children included),
// in order.
func (b *Backend) Created() []*Sandbox {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.created)
}

func (b *Backend) exec(ctx context.Context, sb *Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	switch req.Session {
	case "rollcage-probe", "rollcage-hash", "rollcage-tools":
		return sandbox.ExecResult{Shell: "bash"}, nil
	case "rollcage-submit":
		return b.submit(sb, req), nil
	case "rollcage-grade":
		if b.Passed != nil && !b.Passed(sb) {
			return sandbox.ExecResult{Output: "F\n1 failed, 2 passed in 0.05s\n", ExitCode: 1, Shell: "bash"}, nil
		}
		return sandbox.ExecResult{Output: "...\n3 passed in 0.05s\n", Shell: "bash"}, nil
	}
	if b.Exec != nil {
		return b.Exec(ctx, sb, req)
	}
	return Echo(ctx, sb, req)
}

// submit answers grading's submit session: the kill of what is left, the
// change taken (Diff and Files), the import-surface query, the apply.
func (b *Backend) submit(sb *Sandbox, req sandbox.ExecRequest) sandbox.ExecResult {
	switch {
	case strings.Contains(req.Command, "rollcage-kill-left"):
		return sandbox.ExecResult{Output: "rollcage-kill-left 0\n", Shell: "bash"}
	case strings.Contains(req.Command, "read-tree"):
		for _, f := range []string{"tree", "config", "ignored"} {
			sb.SetFile("/tmp/rollcage-submit/"+f, "")
		}
		sb.SetFile("/tmp/rollcage-submit/diff", b.Diff)
		sb.SetFile("/tmp/rollcage-submit/files", b.Files)
		return sandbox.ExecResult{Output: "ok\n", Shell: "bash"}
	}
	return sandbox.ExecResult{Shell: "bash"}
}

// Sandbox is an in-memory sandbox: a map of files (or a host directory,
// Backend.Dir) and a shell whose answers come from an ExecFunc. It
// records what it was asked to do, so a test can prove a blocked call
// never reached it.
type Sandbox struct {
	spec sandbox.Spec
	exec ExecFunc
	b    *Backend // nil for a Sandbox made with New

	mu     sync.Mutex
	files  files    // guarded by mu
	ran    []string // commands run and "write PATH" for writes; guarded by mu
	policy []string // commands of the policy's sessions; guarded by mu
	closed bool     // guarded by mu
	copied bool     // CopyIn was called (the hidden tests went in); guarded by mu
	// started are the processes a Streamer started, for Close to kill;
	// guarded by mu.
	started []sandbox.Process
}

var (
	_ sandbox.Sandbox     = (*Sandbox)(nil)
	_ sandbox.Forker      = (*Sandbox)(nil)
	_ sandbox.Snapshotter = (*Sandbox)(nil)
)

// New returns a Sandbox whose every command, rollcage's own sessions
// included, exec answers. Nil exec answers every command with empty
// output in /workspace.
func New(spec sandbox.Spec, exec ExecFunc) *Sandbox {
	if exec == nil {
		exec = func(context.Context, *Sandbox, sandbox.ExecRequest) (sandbox.ExecResult, error) {
			return sandbox.ExecResult{Shell: "bash", Cwd: "/workspace"}, nil
		}
	}
	return &Sandbox{spec: spec, exec: exec, files: memFiles{}}
}

// canon is p in the sandbox's terms: clean, and below Dir's root for a
// host path there.
func (s *Sandbox) canon(p string) string {
	p = path.Clean(p)
	if d, ok := s.files.(dirFiles); ok {
		if rest, ok := strings.CutPrefix(p, d.root); ok && (rest == "" || rest[0] == '/') {
			p = rest
		}
		p = path.Join("/", p)
	}
	return p
}

// HostDir is the host directory that holds the sandbox's files
// (Backend.Dir), "" for one that keeps them in memory.
func (s *Sandbox) HostDir() string {
	if d, ok := s.files.(dirFiles); ok {
		return d.root
	}
	return ""
}

// ID is "fake-" and the episode's id.
func (s *Sandbox) ID() string { return "fake-" + s.spec.EpisodeID }

// Spec returns the spec the sandbox was made with.
func (s *Sandbox) Spec() sandbox.Spec { return s.spec }

// Exec runs the command through the sandbox's ExecFunc.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return sandbox.ExecResult{}, fmt.Errorf("fake exec: %w", sandbox.ErrClosed)
	}
	s.ran = append(s.ran, req.Command)
	if !strings.HasPrefix(req.Session, "rollcage-") {
		s.policy = append(s.policy, req.Command)
	}
	s.mu.Unlock()
	return s.exec(ctx, s, req)
}

// rootOnly are the paths the sandbox user may not read, as in an image.
var rootOnly = []string{"/etc/shadow", "/etc/gshadow", "/root"}

// rootDirs are the directories of an image the sandbox user may not
// write in; everywhere else (the workdir, /tmp, home) it may.
var rootDirs = []string{"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/boot", "/root", "/proc", "/sys"}

// under reports whether p is one of dirs or lies below one.
func under(p string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return p == d || strings.HasPrefix(p, d+"/") })
}

// ReadFile returns a file's content. What the sandbox user could not read
// is a *sandbox.PathError: a missing file (wrapping sandbox.ErrNotFound),
// a directory (a path with files below it), /etc/shadow, /etc/gshadow
// and /root (permission).
func (s *Sandbox) ReadFile(ctx context.Context, p string, max int64) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false, fmt.Errorf("fake read %s: %w", p, sandbox.ErrClosed)
	}
	given := path.Clean(p)
	p = s.canon(p)
	if under(p, rootOnly) {
		return nil, false, &sandbox.PathError{Op: "read", Path: given, Kind: sandbox.KindPermission, Reason: "Permission denied"}
	}
	data, err := s.files.read(p)
	if err != nil {
		return nil, false, fill(err, "read", given)
	}
	if max > 0 && int64(len(data)) > max {
		return data[:max], true, nil
	}
	return data, false, nil
}

// WriteFile sets a file's content. A write in an image's root-owned
// directories (/etc, /usr, /bin, /sbin, /lib, /lib64, /boot, /root, /proc,
// /sys) is refused with a *sandbox.PathError (permission), as the sandbox
// user's would be.
func (s *Sandbox) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("fake write %s: %w", p, sandbox.ErrClosed)
	}
	s.ran = append(s.ran, "write "+p)
	c := s.canon(p)
	if under(c, rootDirs) {
		return &sandbox.PathError{Op: "write", Path: p, Kind: sandbox.KindPermission, Reason: "Permission denied"}
	}
	if err := s.files.write(c, data, mode); err != nil {
		return fill(err, "write", p)
	}
	return nil
}

// fill names the operation and the caller's path in a *sandbox.PathError
// from the files, and wraps any other error (the host's fault) with them.
func fill(err error, op, p string) error {
	var pe *sandbox.PathError
	if errors.As(err, &pe) {
		pe.Op, pe.Path = op, p
		return pe
	}
	return fmt.Errorf("fake %s %s: %w", op, p, err)
}

// CopyIn extracts the tar stream's regular files into dir (as root, so
// anywhere) and records that something was copied in (grading's hidden
// tests). Directories are implied by their files; any other entry (a
// link, a device) and a name that leaves dir are refused.
func (s *Sandbox) CopyIn(ctx context.Context, dir string, r io.Reader) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("fake copy in: %w", sandbox.ErrClosed)
	}
	dir = s.canon(dir)
	got := map[string]string{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("fake copy in %s: %w", dir, err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return fmt.Errorf("fake copy in %s: %s is not a regular file or directory (type %q): the fake keeps only those", dir, hdr.Name, hdr.Typeflag)
		}
		p := path.Join(dir, hdr.Name)
		if !strings.HasPrefix(p, dir+"/") {
			return fmt.Errorf("fake copy in %s: entry %s leaves the directory", dir, hdr.Name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return fmt.Errorf("fake copy in %s: %s: %w", dir, hdr.Name, err)
		}
		got[p] = string(data)
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if err := s.files.write(p, []byte(got[p]), 0o644); err != nil {
			return fmt.Errorf("fake copy in %s: %w", dir, err)
		}
	}
	s.copied = true
	return nil
}

// CopyOut returns a tar stream of the file p or of the files below it,
// named relative to p's parent directory, in name order.
func (s *Sandbox) CopyOut(ctx context.Context, p string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("fake copy out %s: %w", p, sandbox.ErrClosed)
	}
	given, p := p, s.canon(p)
	names, err := s.files.below(p)
	if err != nil {
		return nil, fmt.Errorf("fake copy out %s: %w", given, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("fake copy out %s: %w", given, sandbox.ErrNotFound)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range names {
		name := strings.TrimPrefix(f, path.Dir(p)+"/")
		c, err := s.files.read(f)
		if err != nil {
			return nil, fmt.Errorf("fake copy out %s: %s: %w", given, f, err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg}); err != nil {
			return nil, fmt.Errorf("fake copy out %s: %w", p, err)
		}
		if _, err := tw.Write(c); err != nil {
			return nil, fmt.Errorf("fake copy out %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("fake copy out %s: %w", p, err)
	}
	return io.NopCloser(&buf), nil
}

// Fork gives n sandboxes with copies of the files, each with the episode
// id "<parent>.fork<k>" and the parent's ExecFunc (the fake has no
// processes to carry); they stream when the parent does. A Sandbox made
// with New, or one of a Backend with NoFork or Dir, cannot fork:
// sandbox.ErrUnsupported.
func (s *Sandbox) Fork(ctx context.Context, n int) (sandbox.ForkResult, error) {
	if s.b == nil || s.b.NoFork {
		return sandbox.ForkResult{}, fmt.Errorf("fake fork: %w", sandbox.ErrUnsupported)
	}
	if s.HostDir() != "" {
		return sandbox.ForkResult{}, fmt.Errorf("fake fork: the sandboxes of a Backend with Dir share that directory, so none has files of its own to copy: %w", sandbox.ErrUnsupported)
	}
	if n < 1 || n > sandbox.MaxFork {
		return sandbox.ForkResult{}, fmt.Errorf("fake fork: %d children asked for: ask for 1 to %d (sandbox.MaxFork)", n, sandbox.MaxFork)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.ForkResult{}, fmt.Errorf("fake fork: %w", sandbox.ErrClosed)
	}
	var res sandbox.ForkResult
	for k := 1; k <= n; k++ {
		spec := s.spec
		spec.EpisodeID = fmt.Sprintf("%s.fork%d", s.spec.EpisodeID, k)
		c := New(spec, s.exec)
		c.files, _ = s.files.clone()
		s.b.add(c)
		res.Children = append(res.Children, s.b.wrap(c))
	}
	return res, nil
}

// Snapshot has no image to make: sandbox.ErrUnsupported (ErrClosed after
// Close).
func (s *Sandbox) Snapshot(ctx context.Context, ref string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", fmt.Errorf("fake snapshot: %w", sandbox.ErrClosed)
	}
	return "", fmt.Errorf("fake snapshot: %w", sandbox.ErrUnsupported)
}

// Close marks the sandbox closed, so later calls fail with
// sandbox.ErrClosed, and kills (SIGKILL) the processes a Streamer
// started, as a backend's Close ends them.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	started := s.started
	s.started = nil
	s.mu.Unlock()
	for _, p := range started {
		p.Signal(ctx, syscall.SIGKILL) // one that ended is no error
	}
	return nil
}

// File returns a file's content and whether it exists.
func (s *Sandbox) File(p string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.files.read(s.canon(p))
	return string(c), err == nil
}

// SetFile sets a file's content, as the sandbox's own processes would.
// It panics when a Dir sandbox cannot write the host file: a test's own
// set-up that failed.
func (s *Sandbox) SetFile(p, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.files.write(s.canon(p), []byte(content), 0o644); err != nil {
		panic(fmt.Sprintf("fake: set file %s: %v", p, err))
	}
}

// Ran returns every command run, in every session, every command
// started (Streamer), and "write PATH" for every WriteFile, in order.
func (s *Sandbox) Ran() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ran)
}

// Commands returns the commands of the policy's sessions (those not named
// rollcage-*), in order.
func (s *Sandbox) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.policy)
}

// Closed reports whether Close was called.
func (s *Sandbox) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// CopiedIn reports whether CopyIn was called.
func (s *Sandbox) CopiedIn() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.copied
}
