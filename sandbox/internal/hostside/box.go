package hostside

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// Box is what every container sandbox keeps beside its engine's handles:
// the agent connection, its image and host run directory, its name and
// logger (both change when a warm one is handed out), the episode's
// resolved spec (a fork's children get it), and its Close's once. A
// backend's container embeds it.
type Box struct {
	*Conn
	Image  string // the image reference the sandbox was created from
	RunDir string // host directory mounted at RunDirPath

	mu   sync.Mutex
	name string       // guarded by mu
	log  *slog.Logger // guarded by mu
	spec sandbox.Spec // guarded by mu; set by configure and Restore

	// Phases are how its start went: set while it starts, before anyone
	// else holds it, then never changed.
	Phases Phases

	closeOnce sync.Once
	closeErr  error
}

// NewBox is the Box of a sandbox named name, its errors naming it by its
// name at the time.
func NewBox(name, image, runDir string, log *slog.Logger) *Box {
	x := &Box{Image: image, RunDir: runDir, name: name, log: log}
	x.Conn = NewConn(x.Name)
	return x
}

// Name is the sandbox's name now.
func (x *Box) Name() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.name
}

// Logger is the sandbox's logger, scoped to its episode.
func (x *Box) Logger() *slog.Logger {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.log
}

// Spec is the episode's resolved spec (zero before configure).
func (x *Box) Spec() sandbox.Spec {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.spec
}

func (x *Box) rename(name string, log *slog.Logger) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.name, x.log = name, log
}

func (x *Box) setSpec(spec sandbox.Spec) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.spec = spec
}

// Restore configures a fork's child with spec, replays the parent's
// sessions and keeps spec as the child's own.
func (x *Box) Restore(ctx context.Context, spec sandbox.Spec, scripts map[string]string) error {
	if err := x.Conn.Restore(ctx, spec, scripts); err != nil {
		return err
	}
	x.setSpec(spec)
	return nil
}

// Adopt makes a warm sandbox a fork's child: named name and logged as
// log says, its agent's root changed to root (a directory in the
// sandbox where the host mounted the child's file system), configured
// with spec and the parent's sessions replayed; spec is its own from here.
func (x *Box) Adopt(ctx context.Context, root, name string, spec sandbox.Spec, scripts map[string]string, log *slog.Logger) error {
	x.rename(name, log)
	if err := x.Conn.RestoreIn(ctx, root, spec, scripts); err != nil {
		return err
	}
	x.setSpec(spec)
	return nil
}

// Phases are the times into a container's start (from asking for an
// admission slot) at which each step of it ended, for the logs.
type Phases struct {
	Start                                 time.Time
	Admitted, Created, Started, Connected time.Duration
}

// Attrs are the phases as log attributes.
func (p Phases) Attrs() []any {
	return []any{"admitted_at", p.Admitted, "created_at", p.Created, "task_started_at", p.Started, "connected_at", p.Connected}
}
