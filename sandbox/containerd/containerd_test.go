package containerd

import (
	"context"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	var b *Backend
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		b = newTestBackend(t, Config{})
		return b
	}, sandboxtest.Options{
		Image: testImage(),
		Fork:  true,
		RemoveImage: func(ctx context.Context, ref string) error {
			return b.RemoveImage(ctx, ref)
		},
		Labels: func(ctx context.Context, sb sandbox.Sandbox) (map[string]string, error) {
			return sb.(*container).ctr.Labels(b.ctx(ctx))
		},
	})
}

// TestForkWarm runs the conformance fork cases on a backend with a warm
// pool, where children are warm containers that take the fork's layer
// (adopt) instead of new ones, and checks that they did and that a child
// keeps the sandbox's confinement: no way back to the old root, the
// mounts it needs, none of the agent's capabilities.
func TestForkWarm(t *testing.T) {
	img := testImage()
	b := newTestBackend(t, Config{Config: host.Config{Pool: map[string]int{img: 3}}})
	waitWarmN(t, b, 3)
	sandboxtest.RunFork(t, b, sandboxtest.Options{
		Image: img,
		Labels: func(ctx context.Context, sb sandbox.Sandbox) (map[string]string, error) {
			return sb.(*container).ctr.Labels(b.ctx(ctx))
		},
	})
	if got := b.Stats().ForkedWarm; got < 3 {
		t.Fatalf("Stats().ForkedWarm = %d after forking 3 children from a pool of 3: the warm path was not taken (see the log)", got)
	}

	ctx := t.Context()
	waitWarmN(t, b, 1)
	parent, err := b.Create(ctx, sandbox.Spec{Image: img, EpisodeID: "warm-fork-confined"})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close(context.Background())
	waitWarmN(t, b, 1)
	child := sandboxtest.ForkOneWarm(t, parent, func() int64 { return b.Stats().ForkedWarm })
	sandboxtest.WarmForkConfined(t, child, hostside.ForkRoot, hostside.RunDirPath, hostside.AgentPath)
}

func waitWarmN(t *testing.T, b *Backend, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for b.Stats().Warm < n {
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not warm %d containers in 2 minutes (%+v)", n, b.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
