package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { sandboxtest.MainWithVictim(m, reaperChild) }

var testImage = sandboxtest.TestImage

// newTestBackend is New with a private state dir, importing from Docker,
// closed at cleanup. A containerd that does not answer fails the test
// under CI=true and skips it elsewhere.
func newTestBackend(t testing.TB, cfg Config) *Backend {
	t.Helper()
	sandboxtest.SkipShort(t, "containerd")
	if os.Geteuid() != 0 {
		sandboxtest.Unavailable(t, "the containerd backend needs root: run the tests as root")
	}
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	cfg.ImportFromDocker = true
	if cfg.Logger == nil {
		cfg.Logger = sandboxtest.VerboseLogger(t)
	}
	b, err := New(t.Context(), cfg)
	if errors.Is(err, sandbox.ErrUnavailable) {
		sandboxtest.Unavailable(t, fmt.Sprintf("%v (run 'make containerd')", err))
	}
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sandboxtest.CloseAtCleanup(t, b)
	return b
}

// reaperChild creates a sandbox, forks it once, prints the two ids and
// waits to be killed: the victim of TestReaper.
func reaperChild(stateDir string) int {
	ctx := context.Background()
	b, err := New(ctx, Config{ImportFromDocker: true, Config: host.Config{StateDir: stateDir}})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	sb, err := b.Create(ctx, sandbox.Spec{Image: testImage(), EpisodeID: "reaper"})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	res, err := sandbox.Fork(ctx, sb, 1)
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	sandboxtest.Hold(sb.ID(), res.Children[0].ID())
	return 0
}
