package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
)

// labelFrom is the label of a locally built image that says what it was
// built from (an image id, or a hash of the build context): an image whose
// label differs is stale and built again.
const labelFrom = "rollcage.built-from"

// dockerClient is a client of the local engine, or ErrUnavailable with
// what to do.
func dockerClient() (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("%w: docker client: %v", sandbox.ErrUnavailable, err)
	}
	return cli, nil
}

// buildImage builds ref from the build context ctxFS (its Dockerfile at
// the root) unless ref exists with the label labelFrom = from; it never
// pulls (a FROM image that is not local fails the build). network is the
// RUN steps' network ("none": no network, so no bridge is needed; "": the
// engine's default). It reports whether it built.
func buildImage(ctx context.Context, cli *client.Client, ref, from, network string, ctxFS fs.FS) (bool, error) {
	info, err := cli.ImageInspect(ctx, ref)
	switch {
	case err == nil && info.Config != nil && info.Config.Labels[labelFrom] == from:
		return false, nil
	case err != nil && !cerrdefs.IsNotFound(err):
		return false, fmt.Errorf("%w: inspect %s: %v; start dockerd", sandbox.ErrUnavailable, ref, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.AddFS(ctxFS); err != nil {
		return false, fmt.Errorf("build %s: pack the build context: %w", ref, err)
	}
	if err := tw.Close(); err != nil {
		return false, err
	}
	res, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{
		Tags: []string{ref}, Remove: true, ForceRemove: true, PullParent: false, NetworkMode: network,
		Labels: map[string]string{labelFrom: from},
	})
	if err != nil {
		return false, fmt.Errorf("build %s: %w", ref, err)
	}
	defer res.Body.Close()
	if err := jsonmessage.DisplayJSONMessagesStream(res.Body, io.Discard, 0, false, nil); err != nil {
		return false, fmt.Errorf("build %s: %w (rollcage never pulls: a FROM image must be present locally)", ref, err)
	}
	return true, nil
}

// imageID is the id of the local image ref.
func imageID(ctx context.Context, cli *client.Client, ref string) (string, error) {
	info, err := cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("image %s is not present locally; rollcage never pulls: build it first (make images)", ref)
	}
	if err != nil {
		return "", fmt.Errorf("%w: inspect %s: %v; start dockerd", sandbox.ErrUnavailable, ref, err)
	}
	return info.ID, nil
}

// loadTasks reads --tasks: a task file, or a Harbor task or dataset
// directory, whose tasks' images are built from their environment/
// Dockerfile when missing (tagged by content hash, so an edit builds anew).
func loadTasks(ctx context.Context, p string, o task.LoadOptions, stderr io.Writer) ([]task.Task, fs.FS, error) {
	st, err := os.Stat(p)
	if err != nil || !st.IsDir() || !task.IsHarborDir(os.DirFS(p), ".") {
		return task.LoadFileWith(p, o)
	}
	tasks, fsys, err := task.LoadHarbor(p)
	if err != nil {
		return nil, nil, err
	}
	var cli *client.Client
	for _, t := range tasks {
		if t.BuildContext == "" {
			continue
		}
		if cli == nil {
			if cli, err = dockerClient(); err != nil {
				return nil, nil, err
			}
			defer cli.Close()
		}
		built, err := buildImage(ctx, cli, t.Image, t.Image, "", os.DirFS(filepath.Join(p, filepath.FromSlash(t.BuildContext))))
		if err != nil {
			return nil, nil, fmt.Errorf("task %s: %w", t.ID, err)
		}
		if built {
			fmt.Fprintf(stderr, "built %s from %s\n", t.Image, filepath.Join(p, t.BuildContext, "Dockerfile"))
		}
	}
	return tasks, fsys, nil
}
