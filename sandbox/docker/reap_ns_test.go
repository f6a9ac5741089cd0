package docker

import (
	"testing"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// TestReapOtherPidNamespace: a container owned by a rollcage in another
// pid namespace (the compose gateway, say) is not reaped from here while it
// has not stopped, since its owner's pid means nothing in this namespace;
// one owned by a dead process of this namespace is.
func TestReapOtherPidNamespace(t *testing.T) {
	cli := testClient(t)
	ctx := t.Context()
	start := func(ns string, run bool) string {
		t.Helper()
		labels := hostside.Owner{PID: 999999, Start: 1, Boot: hostside.BootID(), PidNS: ns}.Labels()
		c, err := cli.ContainerCreate(ctx, &dcontainer.Config{Image: testImage(), Cmd: []string{"sleep", "300"}, Labels: labels},
			&dcontainer.HostConfig{NetworkMode: "none", AutoRemove: false}, &network.NetworkingConfig{}, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.ContainerRemove(ctx, c.ID, dcontainer.RemoveOptions{Force: true}) })
		if run {
			if err := cli.ContainerStart(ctx, c.ID, dcontainer.StartOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return c.ID
	}
	// Other packages' tests reap concurrently (docker.New reaps): the local
	// container, whose owner is dead from the start, is never started, so
	// it being reaped before this test's Reap changes nothing.
	foreign := start("pid:[1]", true)
	foreignCreated := start("pid:[1]", false) // created, not yet started: being set up
	local := start(hostside.PidNamespace(), false)
	if _, err := Reap(ctx, cli, t.TempDir(), testLogger(t)); err != nil {
		t.Fatal(err)
	}
	exists := func(id string) bool {
		_, err := cli.ContainerInspect(ctx, id)
		return err == nil
	}
	if !exists(foreign) {
		t.Error("reaped a running container of another pid namespace")
	}
	if !exists(foreignCreated) {
		t.Error("reaped a container another pid namespace's rollcage is still setting up")
	}
	if exists(local) {
		t.Error("left a container whose owner (pid 999999 of this namespace) is gone")
	}
}
