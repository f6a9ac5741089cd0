package hostside

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/sandbox"
)

// CheckFork is what every backend's Fork checks first: x is open, n in
// range, the backend open, and x's egress not proxy mode (its children
// would share the parent's proxy socket, so their traffic would be the
// parent's episode's; each needs an attachment of its own, which the host
// side that made the parent's would have to make). It returns what the
// fork starts from: x's spec and its shell sessions.
func (k *Core[C]) CheckFork(x *Box, n int) (sandbox.Spec, []string, error) {
	if x.IsClosed() {
		return sandbox.Spec{}, nil, x.ErrClosed("fork")
	}
	if n < 1 || n > sandbox.MaxFork {
		return sandbox.Spec{}, nil, fmt.Errorf("sandbox %s: fork: n = %d: ask for 1 to %d children", x.Name(), n, sandbox.MaxFork)
	}
	spec := x.Spec()
	if spec.Network == sandbox.NetworkProxy || spec.ProxySocket != "" {
		return sandbox.Spec{}, nil, fmt.Errorf("sandbox %s: fork: the sandbox's egress is network proxy mode, whose proxy socket is the parent's own: create it with network none to fork it: %w", x.Name(), sandbox.ErrUnsupported)
	}
	if err := k.Slots.CheckOpen("fork"); err != nil {
		return sandbox.Spec{}, nil, err
	}
	return spec, x.Sessions(), nil
}

// ChildSpec is the spec of a fork's i-th child (from 0): the parent's,
// under the episode id <parent>.fork<i+1>.
func ChildSpec(spec sandbox.Spec, i int) sandbox.Spec {
	spec.EpisodeID += ".fork" + strconv.Itoa(i+1)
	return spec
}

// WarmFits reports whether a warm container can become a fork child of
// spec: a backend sets the child's limits on its cgroup, but the lease is
// the agent's argument and proxy mode a mount of its own.
func (k *Core[C]) WarmFits(spec sandbox.Spec) bool {
	return spec.Network == sandbox.NetworkNone && spec.ProxySocket == "" && spec.Lease == k.Cfg.Lease && spec.User == sandbox.UserDefault
}

// TakeWarmForFork takes up to n warm containers of spec's image from the
// pool when they fit. The pool is not woken: the fork wakes it when it is
// done, so that starting new warm containers does not compete with the
// children.
func (k *Core[C]) TakeWarmForFork(spec sandbox.Spec, n int) []C {
	if !k.WarmFits(spec) {
		return nil
	}
	var out []C
	for len(out) < n {
		c, ok := k.Pool.Take(spec.Image)
		if !ok {
			break
		}
		out = append(out, c)
	}
	return out
}

// MakeChildren makes a fork's n children at once, child i by mk(ctx, i),
// which owns it: on error it leaves neither its container nor its slot.
// When one fails, the children already made are closed and its error is
// returned.
func MakeChildren[C interface {
	comparable
	sandbox.Sandbox
}](ctx context.Context, n int, mk func(ctx context.Context, i int) (C, error)) ([]sandbox.Sandbox, error) {
	made := make([]C, n)
	g, gctx := errgroup.WithContext(ctx)
	for i := range n {
		g.Go(func() error {
			c, err := mk(gctx, i)
			made[i] = c
			return err
		})
	}
	err := g.Wait()
	children := make([]sandbox.Sandbox, n)
	var none C
	for i, c := range made {
		if c == none {
			continue
		}
		if err != nil {
			c.Close(ctx)
		}
		children[i] = c
	}
	if err != nil {
		return nil, err
	}
	return children, nil
}

// Forked is the result of x's fork that began at start, its Duration set,
// logged once; warm is how many children were warm containers, phases the
// backend's own step times as slog key-value pairs.
func (x *Box) Forked(res sandbox.ForkResult, start time.Time, warm int, phases ...any) sandbox.ForkResult {
	res.Duration = time.Since(start)
	attrs := []any{"children", len(res.Children), "warm", warm, "paused", res.Paused, "changed_bytes", res.ChangedBytes, "duration", res.Duration}
	x.Logger().Info("sandbox forked", append(attrs, phases...)...)
	return res
}
