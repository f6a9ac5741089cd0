package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/containerd"
	"github.com/rollcage/rollcage/sandbox/docker"
)

// Backends of --backend.
const (
	backendDocker     = "docker"
	backendContainerd = "containerd"
)

// addBackendFlag is --backend, the sandbox backend of a command that
// starts sandboxes.
func addBackendFlag(fs *flag.FlagSet) *string {
	return fs.String("backend", envOr("ROLLCAGE_BACKEND", backendDocker), "sandbox backend: docker, or containerd (its own namespace on the machine's containerd; images imported from Docker's store) (env ROLLCAGE_BACKEND)")
}

// backend is what the commands need of a sandbox backend beyond
// sandbox.Backend.
type backend interface {
	sandbox.Backend
	Close(ctx context.Context) error
	// RemoveEpisode removes the sandboxes of an episode whose owner is gone.
	RemoveEpisode(ctx context.Context, episodeID string) (int, error)
	// poolStats: sandboxes alive (warm included) and warm.
	poolStats() (alive, warm int)
}

type backendOptions struct {
	kind     string
	stateDir string
	pool     map[string]int
	limits   sandbox.Limits
	log      *slog.Logger
}

// openBackend starts the backend --backend names.
func openBackend(ctx context.Context, o backendOptions) (backend, error) {
	switch o.kind {
	case backendDocker, "":
		b, err := docker.New(ctx, docker.Config{StateDir: o.stateDir, Pool: o.pool, Logger: o.log, DefaultLimits: o.limits})
		if err != nil {
			return nil, err
		}
		return dockerBackend{b}, nil
	case backendContainerd:
		b, err := containerd.New(ctx, containerd.Config{StateDir: o.stateDir, Pool: o.pool, Logger: o.log, DefaultLimits: o.limits, ImportFromDocker: true})
		if err != nil {
			return nil, err
		}
		return &containerdBackend{Backend: b, log: o.log}, nil
	default:
		return nil, fmt.Errorf("--backend %q: use %s or %s", o.kind, backendDocker, backendContainerd)
	}
}

type dockerBackend struct{ *docker.Backend }

func (b dockerBackend) poolStats() (int, int) { st := b.Stats(); return st.Alive, st.Warm }

// containerdBackend seals task images with Docker's backend (the sealed
// image is then imported like any other): containerd's backend has no
// sealing of its own.
type containerdBackend struct {
	*containerd.Backend
	log *slog.Logger

	mu     sync.Mutex
	sealer *docker.Backend // guarded by mu; started at the first Seal
}

func (b *containerdBackend) poolStats() (int, int) { st := b.Stats(); return st.Alive, st.Warm }

// Seal seals spec's image in Docker's store; containerd imports the
// result when a sandbox of it is created.
func (b *containerdBackend) Seal(ctx context.Context, spec sandbox.SealSpec) (sandbox.Sealed, error) {
	b.mu.Lock()
	if b.sealer == nil {
		d, err := docker.New(ctx, docker.Config{Logger: b.log})
		if err != nil {
			b.mu.Unlock()
			return sandbox.Sealed{}, fmt.Errorf("seal for containerd: %w", err)
		}
		b.sealer = d
	}
	sealer := b.sealer
	b.mu.Unlock()
	return sealer.Seal(ctx, spec)
}

func (b *containerdBackend) Close(ctx context.Context) error {
	err := b.Backend.Close(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sealer != nil {
		err = errors.Join(err, b.sealer.Close(ctx))
	}
	return err
}
