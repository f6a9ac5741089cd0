package docker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestForkWarm runs the conformance fork cases on a backend with a warm
// pool, where children are warm containers whose agent changes its root
// into an overlay of the image and a copy of the parent's layer (adopt)
// instead of new containers, and checks that they did, that a child keeps
// the sandbox's confinement (no way back to the old root, the mounts it
// needs, no capabilities, the parent's limits on its cgroup) and that its
// Snapshot holds its files, not its container's layer.
func TestForkWarm(t *testing.T) {
	img := testImage()
	cli := testClient(t)
	b := newTestBackend(t, Config{Pool: map[string]int{img: 3}})
	waitWarm(t, b, img, 3)
	sandboxtest.RunFork(t, b, sandboxtest.Options{Image: img, ForkUnlabelled: true, RemoveImage: removeImage(cli)})
	if got := b.Stats().ForkedWarm; got < 3 {
		t.Fatalf("Stats().ForkedWarm = %d after forking 3 children from a pool of 3: the warm path was not taken (see the log)", got)
	}

	ctx := t.Context()
	waitWarm(t, b, img, 3)
	parent, err := b.Create(ctx, sandbox.Spec{Image: img, EpisodeID: "warm-fork-confined"})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close(context.Background())
	if r, err := parent.Exec(ctx, sandbox.ExecRequest{Command: "echo parent > /workspace/p.txt && rm ~/.bashrc"}); err != nil || r.ExitCode != 0 {
		t.Fatalf("parent: %v %+v", err, r)
	}
	waitWarm(t, b, img, 1)
	child := sandboxtest.ForkOneWarm(t, parent, func() int64 { return b.Stats().ForkedWarm })
	if r, err := child.Exec(ctx, sandbox.ExecRequest{Command: "cat /workspace/p.txt; test -e ~/.bashrc && echo present || echo deleted"}); err != nil || strings.TrimSpace(r.Output) != "parent\ndeleted" {
		t.Errorf("child: the parent's file and deletion: %v %+v", err, r)
	}
	sandboxtest.WarmForkConfined(t, child, hostside.ForkRoot, hostside.RunDirPath, hostside.AgentPath)

	// The child's Snapshot is its files: a sandbox of it has the parent's
	// file, the deletion and the child's own write.
	if r, err := child.Exec(ctx, sandbox.ExecRequest{Command: "echo child > /workspace/c.txt"}); err != nil || r.ExitCode != 0 {
		t.Fatalf("child: %v %+v", err, r)
	}
	ref := "rollcage-test/warm-fork-snapshot:" + randomToken()
	if _, err := sandbox.Snapshot(ctx, child, ref); err != nil {
		t.Fatalf("Snapshot of a warm child: %v", err)
	}
	t.Cleanup(func() { removeImage(cli)(context.Background(), ref) })
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	sb, err := b.Create(sctx, sandbox.Spec{Image: ref, EpisodeID: "warm-fork-snapshot"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	r, err := sb.Exec(sctx, sandbox.ExecRequest{Command: "cat /workspace/p.txt /workspace/c.txt; test -e ~/.bashrc && echo present || echo deleted"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(r.Output); got != "parent\nchild\ndeleted" {
		t.Errorf("a sandbox of the warm child's snapshot: %q, want %q", got, "parent\nchild\ndeleted")
	}
}
