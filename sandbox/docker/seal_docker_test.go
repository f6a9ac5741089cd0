package docker

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/rollcage/rollcage/sandbox"
)

// sealSourceScript makes a repository with everything sealing must remove:
// HEAD on a branch at the fix (base is its parent), the fix also on a
// remote-tracking branch with upstream configuration, a tag, a stash, a
// note, a replace ref, packed refs, reflogs, ORIG_HEAD, COMMIT_EDITMSG, a
// dangling commit, an alternate object store and a stale byte-code cache.
const sealSourceScript = `set -e
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@x
mkdir -p /srv/alt && git init -q --bare /srv/alt
mkdir -p /workspace && cd /workspace && git init -q -b work .
echo 'def f(): return 1' > m.py && git add m.py && git commit -qm base
echo 'def f(): return 2  # SEALTEST-FIX-LINE' > m.py && git commit -qam 'SEALTEST fix message'
git remote add origin https://example.invalid/r.git
git update-ref refs/remotes/origin/work HEAD
git config branch.work.remote origin && git config branch.work.merge refs/heads/work
git tag v2 HEAD && git pack-refs --all
echo stash-content-SEALTEST > s.txt && git add s.txt && git stash -q
git notes add -m 'SEALTEST note' HEAD
git replace HEAD~1 HEAD
echo 'dangling SEALTEST' > d.txt && git add d.txt && git commit -qm dangling && git reset -q --hard HEAD~1
git update-ref ORIG_HEAD HEAD
mkdir -p __pycache__ && echo 'SEALTEST-FIX-LINE' > __pycache__/m.cpython-311.pyc
echo /srv/alt/objects > .git/objects/info/alternates
chown -R 1000:1000 /workspace
`

// makeSealSource commits a container of the test image that ran
// sealSourceScript as an image with an entry point and a label of its own.
func makeSealSource(t *testing.T, cli *client.Client) string {
	t.Helper()
	ctx := t.Context()
	resp, err := cli.ContainerCreate(ctx, &dcontainer.Config{Image: testImage(), User: "0:0",
		Entrypoint: []string{"/bin/sh", "-c", sealSourceScript}}, &dcontainer.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.ContainerRemove(context.WithoutCancel(ctx), resp.ID, dcontainer.RemoveOptions{Force: true})
	if err := cli.ContainerStart(ctx, resp.ID, dcontainer.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	wc, ec := cli.ContainerWait(ctx, resp.ID, dcontainer.WaitConditionNotRunning)
	select {
	case w := <-wc:
		if w.StatusCode != 0 {
			rc, _ := cli.ContainerLogs(ctx, resp.ID, dcontainer.LogsOptions{ShowStdout: true, ShowStderr: true})
			var out bytes.Buffer
			stdcopy.StdCopy(&out, &out, rc)
			t.Fatalf("source script exited %d: %s", w.StatusCode, out.String())
		}
	case err := <-ec:
		t.Fatal(err)
	}
	ref := "rollcage/sealtest-src:" + randomToken()
	if _, err := cli.ContainerCommit(ctx, resp.ID, dcontainer.CommitOptions{Reference: ref,
		Changes: []string{`ENTRYPOINT ["/bin/cat"]`, `CMD ["/etc/hostname"]`, `USER 1000`, `LABEL sealtest.own=yes`}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeImage(cli)(context.Background(), ref) })
	return ref
}

func TestSealRemovesHistoryBeyondBase(t *testing.T) {
	cli := testClient(t)
	b := newTestBackend(t, Config{})
	src := makeSealSource(t, cli)
	spec := sandbox.SealSpec{Image: src, Base: "HEAD~1",
		Probe: `cd "$1" && git rev-list --all --not "$2" | sed 's/^/future /'; git log -1 --format=%s work`, ProbeArgs: []string{"/workspace", "HEAD~1"}}
	ctx := t.Context()
	s, err := b.Seal(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeImage(cli)(context.Background(), s.Image) })
	if s.Cached || !strings.HasPrefix(s.Image, SealedRepo+":sealtest-src-") {
		t.Fatalf("first seal: cached %v image %s", s.Cached, s.Image)
	}
	// The probe ran on the unsealed repository.
	if !strings.Contains(s.Facts, "future ") || !strings.Contains(s.Facts, "SEALTEST fix message") {
		t.Fatalf("facts taken before sealing miss the future: %q", s.Facts)
	}
	// The image keeps its own configuration, plus the seal's labels.
	img, err := cli.ImageInspect(ctx, s.Image)
	if err != nil {
		t.Fatal(err)
	}
	c := img.Config
	if !slices.Equal(c.Entrypoint, []string{"/bin/cat"}) || !slices.Equal(c.Cmd, []string{"/etc/hostname"}) || c.User != "1000" || c.Labels["sealtest.own"] != "yes" {
		t.Errorf("sealed image config: entrypoint %q cmd %q user %q labels %v", c.Entrypoint, c.Cmd, c.User, c.Labels)
	}
	if c.Labels[LabelSealSource] == "" || c.Labels[LabelSealKey] == "" || c.Labels[LabelSealFacts] == "" {
		t.Errorf("seal labels missing: %v", c.Labels)
	}
	if strings.Contains(strings.Join(c.Cmd, " "), "rollcage-seal") {
		t.Errorf("the seal command stayed in the image: %q", c.Cmd)
	}

	// Cached: the same image, facts read back from its label, also by a
	// backend that did not seal it.
	again, err := newTestBackend(t, Config{}).Seal(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cached || again.Image != s.Image || again.Facts != s.Facts {
		t.Errorf("second seal: cached %v image %s (want %s), facts equal %v", again.Cached, again.Image, s.Image, again.Facts == s.Facts)
	}

	sb, err := b.Create(ctx, sandbox.Spec{Image: s.Image, EpisodeID: "sealtest"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.WithoutCancel(ctx))
	run := func(cmd string) string {
		t.Helper()
		r, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "cd /workspace && " + cmd, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(r.Output)
	}
	checks := []struct{ cmd, want string }{
		{`git for-each-ref --format='%(refname)'`, "refs/heads/work"},
		{`git symbolic-ref HEAD`, "refs/heads/work"},
		{`git log --all --reflog --format=%s`, "base"},
		{`git cat-file --batch-all-objects --batch-check | wc -l`, "3"}, // commit, tree, blob
		{`git remote; git config --local --get-regexp '^(branch|remote)\.'; ls .git/logs .git/ORIG_HEAD .git/COMMIT_EDITMSG .git/packed-refs .git/objects/info/alternates 2>&1 | grep -vc 'No such file'`, "0"},
		{`git stash list; git notes list; git replace -l; ls -d __pycache__ 2>/dev/null; cat m.py`, "def f(): return 1"},
		{`grep -rl SEALTEST . ; git count-objects -v | grep -E '^(count|garbage)'`, "count: 0\ngarbage: 0"},
		{`git status --porcelain; git fsck --full 2>&1 | grep -v '^Checking' ; echo ok`, "ok"},
		{`echo x >> m.py && git -c user.name=p -c user.email=p@x commit -qam more && git log --format=%s | head -1`, "more"}, // the sandbox user still owns .git
	}
	for _, ck := range checks {
		if got := run(ck.cmd); got != ck.want {
			t.Errorf("%s:\n got %q\nwant %q", ck.cmd, got, ck.want)
		}
	}
}

func TestSealTagName(t *testing.T) {
	for in, want := range map[string]string{
		"rollcage/demo-textwrap:latest": "demo-textwrap-latest",
		"ghcr.io/acme/task:v1":          "ghcr.io-acme-task-v1",
		"acme/task@sha256:abc":          "acme-task",
		"///":                           "image",
	} {
		if got := sealTagName(in); got != want {
			t.Errorf("sealTagName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPruneSealed: gc keeps the sealed image of a current task image and
// removes it once the task image's tag names something else (a rebuild).
func TestPruneSealed(t *testing.T) {
	cli := testClient(t)
	b := newTestBackend(t, Config{})
	src := makeSealSource(t, cli)
	ctx := t.Context()
	s, err := b.Seal(ctx, sandbox.SealSpec{Image: src, Base: "HEAD~1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeImage(cli)(context.Background(), s.Image) })
	removed, err := b.PruneSealed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(removed, s.Image) {
		t.Fatalf("pruned %s while its source %s is current", s.Image, src)
	}
	// "Rebuild": the tag moves to another image; the old source is untagged.
	if err := cli.ImageTag(ctx, testImage(), src); err != nil {
		t.Fatal(err)
	}
	removed, err = b.PruneSealed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, s.Image) {
		t.Fatalf("pruned %v, want the stale %s among them", removed, s.Image)
	}
	if _, err := cli.ImageInspect(ctx, s.Image); !cerrdefs.IsNotFound(err) {
		t.Errorf("stale sealed image still there (inspect: %v)", err)
	}
}
