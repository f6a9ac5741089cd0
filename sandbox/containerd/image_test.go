package containerd

import (
	"context"
	"errors"
	"strings"
	"testing"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	dockerclient "github.com/docker/docker/client"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestImportFollowsDocker: an image is imported from Docker's store on
// first use, and imported again by a later backend once Docker's copy was
// rebuilt under the same reference; an image in neither store is
// ErrImageMissing saying what to run.
func TestImportFollowsDocker(t *testing.T) {
	sandboxtest.RequireDocker(t)
	first := newTestBackend(t, Config{})
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := t.Context()
	ref := "rollcage-test/reimport:" + hostside.RandomToken()
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true})
		first.RemoveImage(context.Background(), ref)
	})
	build := func(marker string) {
		t.Helper()
		c, err := cli.ContainerCreate(ctx, &dcontainer.Config{Image: testImage(), User: "0", Cmd: []string{"sh", "-c", "echo " + marker + " > /marker"}},
			&dcontainer.HostConfig{NetworkMode: "none"}, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		defer cli.ContainerRemove(context.Background(), c.ID, dcontainer.RemoveOptions{Force: true})
		if err := cli.ContainerStart(ctx, c.ID, dcontainer.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		okc, errc := cli.ContainerWait(ctx, c.ID, dcontainer.WaitConditionNotRunning)
		select {
		case <-okc:
		case err := <-errc:
			t.Fatal(err)
		}
		if _, err := cli.ContainerCommit(ctx, c.ID, dcontainer.CommitOptions{Reference: ref}); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(b *Backend) string {
		t.Helper()
		sb := sandboxtest.Create(t, b, sandbox.Spec{Image: ref, EpisodeID: "reimport"})
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "cat /marker"})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(res.Output)
	}
	build("one")
	if got := marker(first); got != "one" {
		t.Fatalf("first import: /marker = %q, want one", got)
	}
	build("two")
	if got := marker(newTestBackend(t, Config{})); got != "two" {
		t.Errorf("after Docker's rebuild: /marker = %q, want two (imported again)", got)
	}

	_, err = first.Create(ctx, sandbox.Spec{Image: "rollcage-test/absent:" + hostside.RandomToken(), EpisodeID: "absent"})
	if !errors.Is(err, sandbox.ErrImageMissing) || !strings.Contains(err.Error(), "make images") {
		t.Errorf("absent image: %v, want ErrImageMissing naming 'make images'", err)
	}
}
