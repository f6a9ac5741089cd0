package docker

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { sandboxtest.MainWithVictim(m, reaperChild) }

var testImage = sandboxtest.TestImage

// requireImage fails under CI and skips otherwise when the test image is
// not built.
func requireImage(t testing.TB, cli client.APIClient) {
	t.Helper()
	if _, err := cli.ImageInspect(t.Context(), testImage()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("test image %s: %v: run 'make images'", testImage(), err)
		}
		t.Skipf("test image %s missing (run 'make images'): %v", testImage(), err)
	}
}

// testClient is a Docker client for assertions made behind the backend's
// back.
func testClient(t testing.TB) *client.Client {
	t.Helper()
	sandboxtest.RequireDocker(t)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	requireImage(t, cli)
	return cli
}

// newTestBackend is New with a private state dir, closed at cleanup.
func newTestBackend(t testing.TB, cfg Config) *Backend {
	t.Helper()
	testClient(t)
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = sandboxtest.VerboseLogger(t)
	}
	b, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sandboxtest.CloseAtCleanup(t, b)
	return b
}

// containerLabels returns a sandbox's container labels (Options.Labels).
func containerLabels(cli client.APIClient) func(ctx context.Context, sb sandbox.Sandbox) (map[string]string, error) {
	return func(ctx context.Context, sb sandbox.Sandbox) (map[string]string, error) {
		st, err := cli.ContainerInspect(ctx, sb.ID())
		if err != nil {
			return nil, err
		}
		return st.Config.Labels, nil
	}
}

func removeImage(cli client.APIClient) func(ctx context.Context, ref string) error {
	return func(ctx context.Context, ref string) error {
		_, err := cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true})
		return err
	}
}

// reaperChild creates two sandboxes, forks the second once, prints the
// three ids and waits to be killed: the victim of TestReaper.
func reaperChild(stateDir string) int {
	ctx := context.Background()
	b, err := New(ctx, Config{StateDir: stateDir})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	var ids []string
	for i := range 2 {
		sb, err := b.Create(ctx, sandbox.Spec{Image: testImage(), EpisodeID: fmt.Sprintf("reaper-%d", i)})
		if err != nil {
			fmt.Println("ERROR", err)
			return 1
		}
		ids = append(ids, sb.ID())
		if i == 1 {
			res, err := sandbox.Fork(ctx, sb, 1)
			if err != nil {
				fmt.Println("ERROR", err)
				return 1
			}
			ids = append(ids, res.Children[0].ID())
		}
	}
	sandboxtest.Hold(ids...)
	return 0
}
