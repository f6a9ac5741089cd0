package hostside

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
)

// Timeouts of a backend's operations that the caller's ctx does not bound.
const (
	PingTimeout = 5 * time.Second // the engine's first answer
	// ConnectTimeout bounds the wait for a started agent's socket. A
	// quiet host's agent listens in well under a second; under load
	// (a batch's gradings starting together) 2 of about 900 took over
	// the 5 s this was (issue 35). A crashed agent is seen sooner: Dial
	// checks the container while it waits.
	ConnectTimeout  = 30 * time.Second
	TeardownTimeout = 30 * time.Second
	ShutdownTimeout = 2 * time.Second // the agent's own shutdown, inside teardown
)

// Sandbox is what a backend's Slots and Pool hold: its container type.
type Sandbox interface {
	comparable
	Close(ctx context.Context) error
}

// Engine is what a container backend does with its engine; Core does the
// rest of a sandbox's life (admission, the warm pool, owner labels, the
// run directory, configuring the agent, teardown's order, the live set).
type Engine[C Sandbox] interface {
	// Create creates, but does not start, the container of a new sandbox.
	Create(ctx context.Context, req CreateRequest) (C, error)
	// Start starts a created container, connects to its agent and arms
	// the disk watchdog where the engine does not enforce the limit.
	Start(ctx context.Context, c C, spec sandbox.Spec) error
	// HandOut marks a warm container as the episode of spec's (its name,
	// its labels, as the engine allows) and returns its name now.
	HandOut(ctx context.Context, c C, spec sandbox.Spec) string
	// Remove removes what the engine holds of a container (task,
	// container, snapshot), what Create made of it included; a container
	// already gone is no error.
	Remove(ctx context.Context, c C) error
}

// CreateRequest is a container for Engine.Create to make.
type CreateRequest struct {
	Spec   sandbox.Spec // resolved
	Box    *Box         // named, its run dir made
	Labels map[string]string
	Warm   bool   // for the pool
	From   string // a fork's committed layer to start from, in the engine's terms; "": the image
}

// Core is the engine-neutral part of a container backend. It is safe for
// concurrent use.
type Core[C Sandbox] struct {
	Cfg   host.Config // resolved
	Self  Owner
	Pool  *Pool[C]
	Slots *Slots[C] // admission, MaxAlive, the live set
	// ForkedWarm counts the fork children made from warm containers.
	ForkedWarm atomic.Int64

	prefix string
	eng    Engine[C]
	box    func(C) *Box
	name   func(episode, token string) string

	stopRefill context.CancelFunc
	refillDone chan struct{}
}

// NewCore is the core of a backend named prefix over eng, with cfg
// resolved (host.Config.Resolve); box gives a container's Box, name a
// container's name for an episode and a random token. It makes the state
// directory; Run starts it.
func NewCore[C Sandbox](prefix string, cfg host.Config, eng Engine[C], box func(C) *Box, name func(episode, token string) string) (*Core[C], error) {
	self, err := SelfOwner()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o711); err != nil {
		return nil, fmt.Errorf("%s: state dir %s: %w", prefix, cfg.StateDir, err)
	}
	k := &Core[C]{Cfg: cfg, Self: self, prefix: prefix, eng: eng, box: box, name: name}
	k.Pool = NewPool(cfg.Pool, func(c C) string { return box(c).Image })
	k.Slots = NewSlots(prefix, cfg.MaxCreating, cfg.MaxAlive, k.Pool)
	return k, nil
}

// Run removes what dead rollcage processes left behind (reap) and starts
// warming the pool until Close.
func (k *Core[C]) Run(ctx context.Context, reap func(context.Context) (int, error)) {
	log := k.Cfg.Logger
	if n, err := reap(ctx); err != nil {
		log.Warn("reap leftovers", "err", err)
	} else if n > 0 {
		log.Info("reaped leftovers of dead rollcage processes", "removed", n)
	}
	if os.Geteuid() == 1000 {
		// The run dirs are 0700 and owned by us; a sandbox user with our
		// uid would own them too and could drive its own agent.
		log.Warn("rollcage runs as uid 1000, the sandbox user's uid: sandboxed commands could reach the agent socket; run as another user")
	}
	refillCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	k.stopRefill = stop
	k.refillDone = make(chan struct{})
	go func() {
		defer close(k.refillDone)
		k.Pool.Refill(refillCtx, log, k.warmOne)
	}()
}

// Stats are the backend's counters now.
func (k *Core[C]) Stats() sandbox.Stats {
	creating, alive := k.Slots.Counts()
	return sandbox.Stats{Creating: creating, Alive: alive, Warm: k.Pool.Size(), ForkedWarm: k.ForkedWarm.Load()}
}

// ResolveSpec validates spec and fills its defaults from the
// configuration.
func (k *Core[C]) ResolveSpec(spec sandbox.Spec) (sandbox.Spec, error) {
	spec, err := ResolveSpec(spec, k.Cfg.DefaultLimits, k.Cfg.Lease)
	if err != nil {
		return spec, fmt.Errorf("%s: create: %w", k.prefix, err)
	}
	return spec, nil
}

// Poolable: a warm container was created with the backend's defaults, and
// a running container's configuration cannot change, so only a spec that
// asks for nothing else can take one.
func (k *Core[C]) Poolable(spec sandbox.Spec) bool {
	return spec.Network == sandbox.NetworkNone && len(spec.Labels) == 0 && spec.User == sandbox.UserDefault &&
		spec.Lease == k.Cfg.Lease && spec.Limits == k.Cfg.DefaultLimits
}

// Create starts a sandbox for spec: a warm container when the pool has
// one that fits, else a new one once admission allows.
func (k *Core[C]) Create(ctx context.Context, spec sandbox.Spec) (C, error) {
	var none C
	if err := k.Slots.CheckOpen("create"); err != nil {
		return none, err
	}
	spec, err := k.ResolveSpec(spec)
	if err != nil {
		return none, err
	}
	log := k.Cfg.Logger.With("episode_id", spec.EpisodeID)
	if k.Poolable(spec) {
		if c, ok := k.takeWarm(ctx, spec, log); ok {
			return c, nil
		}
	}
	if err := k.Slots.AcquireAlive(ctx, spec.EpisodeID); err != nil {
		return none, err
	}
	c, err := k.Start(ctx, spec, false, "")
	if err != nil {
		k.Slots.ReleaseAlive()
		return none, err
	}
	if err := k.configure(ctx, c, spec); err != nil {
		c.Close(ctx)
		return none, err
	}
	x := k.box(c)
	log.Info("sandbox created", append(x.Phases.Attrs(), "container", x.Name())...)
	return c, nil
}

// configure hands the episode's settings to the agent and keeps spec as
// the sandbox's.
func (k *Core[C]) configure(ctx context.Context, c C, spec sandbox.Spec) error {
	x := k.box(c)
	if err := x.Configure(ctx, spec); err != nil {
		return fmt.Errorf("%s: configure %s: %w", k.prefix, x.Name(), err)
	}
	x.setSpec(spec)
	return nil
}

// takeWarm hands out a warm container for spec, configured and marked as
// the episode's; false when none fits or the ones there turn out dead.
func (k *Core[C]) takeWarm(ctx context.Context, spec sandbox.Spec, log *slog.Logger) (C, bool) {
	for {
		c, ok := k.Pool.Take(spec.Image)
		if !ok {
			return c, false
		}
		k.Pool.Wake()
		x := k.box(c)
		if err := k.configure(ctx, c, spec); err != nil {
			log.Warn("warm container unusable, discarding", "container", x.Name(), "err", err)
			c.Close(ctx)
			if ctx.Err() != nil {
				return c, false
			}
			continue
		}
		name := k.eng.HandOut(ctx, c, spec)
		x.rename(name, log.With("container", name))
		x.Logger().Info("sandbox handed out from warm pool")
		return c, true
	}
}

// warmOne starts a warm container of img, if a slot under MaxAlive is
// free (episodes first; a close wakes the refiller).
func (k *Core[C]) warmOne(ctx context.Context, img string) (C, error) {
	if !k.Slots.TryAlive() {
		var none C
		return none, ErrNoSlot
	}
	c, err := k.Start(ctx, sandbox.Spec{
		Image: img, Workdir: DefaultWorkdir, Network: sandbox.NetworkNone,
		Limits: k.Cfg.DefaultLimits, Lease: k.Cfg.Lease,
	}, true, "")
	if err != nil {
		k.Slots.ReleaseAlive()
	}
	return c, err
}

// Start creates, starts and connects a container for spec (a warm one for
// the pool, or one whose root file system is the layer from), inside the
// admission bound. The caller holds an alive slot.
func (k *Core[C]) Start(ctx context.Context, spec sandbox.Spec, warm bool, from string) (C, error) {
	var none C
	t0 := time.Now()
	release, err := k.Slots.Admit(ctx, spec.EpisodeID)
	if err != nil {
		return none, err
	}
	defer release()
	admitted := time.Since(t0)
	c, err := k.CreateStopped(ctx, spec, warm, from)
	if err != nil {
		return none, err
	}
	k.box(c).Phases = Phases{Start: t0, Admitted: admitted, Created: time.Since(t0)}
	if err := k.Launch(ctx, c, spec); err != nil {
		return none, err
	}
	return c, nil
}

// CreateStopped makes a container's run dir, names and labels it and has
// the engine create it, not started. The caller holds an alive slot and
// admission.
func (k *Core[C]) CreateStopped(ctx context.Context, spec sandbox.Spec, warm bool, from string) (C, error) {
	var none C
	token := RandomToken()
	runDir := filepath.Join(k.Cfg.StateDir, k.Self.DirName(token))
	if err := os.Mkdir(runDir, 0o700); err != nil {
		return none, fmt.Errorf("%s: create %s: run dir: %w", k.prefix, spec.EpisodeID, err)
	}
	name := k.name(spec.EpisodeID, token)
	if warm {
		name = "rollcage-pool-" + token
	}
	box := NewBox(name, spec.Image, runDir, k.Cfg.Logger.With("episode_id", spec.EpisodeID, "container", name))
	c, err := k.eng.Create(ctx, CreateRequest{Spec: spec, Box: box, Labels: k.Labels(spec, runDir, warm), Warm: warm, From: from})
	if err != nil {
		os.RemoveAll(runDir)
		return none, err
	}
	return c, nil
}

// Labels are a container's labels: the spec's, then ours (the reaper
// depends on them, so they win).
func (k *Core[C]) Labels(spec sandbox.Spec, runDir string, warm bool) map[string]string {
	labels := make(map[string]string, len(spec.Labels)+8)
	maps.Copy(labels, spec.Labels)
	maps.Copy(labels, k.Self.Labels())
	labels[host.LabelRunDir] = filepath.Base(runDir)
	if warm {
		labels[host.LabelPool] = "1"
		labels[host.LabelEpisode] = ""
	} else {
		labels[host.LabelEpisode] = spec.EpisodeID
	}
	return labels
}

// Launch starts a created container, connects to its agent and adds it to
// the live set. On error c is torn down.
func (k *Core[C]) Launch(ctx context.Context, c C, spec sandbox.Spec) error {
	if err := k.eng.Start(ctx, c, spec); err != nil {
		k.Teardown(ctx, c)
		return err
	}
	if err := k.Slots.Add(c, spec.EpisodeID); err != nil {
		k.Teardown(ctx, c)
		return err
	}
	return nil
}

// Close is a sandbox's Close: it shuts the agent down, removes the
// container and its run dir, and frees its slot. It runs once; later and
// concurrent calls return its result.
func (k *Core[C]) Close(ctx context.Context, c C) error {
	x := k.box(c)
	x.closeOnce.Do(func() {
		x.MarkClosed()
		x.closeErr = k.Teardown(ctx, c)
		k.Slots.Forget(c)
		x.Logger().Info("sandbox closed")
	})
	return x.closeErr
}

// Teardown is Close without the bookkeeping, for containers that never
// became sandboxes. It runs past ctx's end, within TeardownTimeout.
func (k *Core[C]) Teardown(ctx context.Context, c C) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TeardownTimeout)
	defer cancel()
	x := k.box(c)
	x.Shutdown(ctx, ShutdownTimeout)
	var errs []error
	if err := k.eng.Remove(ctx, c); err != nil {
		errs = append(errs, err)
	}
	if x.RunDir != "" {
		if err := os.RemoveAll(x.RunDir); err != nil {
			errs = append(errs, fmt.Errorf("%s: remove run dir: %w", k.prefix, err))
		}
	}
	return errors.Join(errs...)
}

// Shutdown stops the pool and closes every sandbox of the backend, then
// calls closeEngine. Idempotent: later calls return nil at once.
func (k *Core[C]) Shutdown(ctx context.Context, closeEngine func() error) error {
	if !k.Slots.MarkClosed() {
		return nil
	}
	if k.stopRefill != nil {
		k.stopRefill()
		<-k.refillDone
	}
	return errors.Join(k.Slots.CloseAll(ctx), closeEngine())
}
