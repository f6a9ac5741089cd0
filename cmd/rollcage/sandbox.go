package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/containerd"
	"github.com/rollcage/rollcage/sandbox/docker"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/kube"
)

func init() {
	register(command{Name: "gc", Summary: "remove containers and host directories left by rollcage processes that are gone, and sealed images of task images rebuilt since", Run: runGC})
	register(command{Name: "images", Summary: "list the images the demo suite needs: present or missing", Run: runImages})
	register(command{Name: "sandbox", Summary: "debugging: start a sandbox from an image and run commands in it (sandbox exec)", Run: runSandbox})
}

func runGC(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gc", "[--state-dir DIR] [--backend docker|containerd|kubernetes [--kubeconfig FILE]]", stderr)
	state := fs.String("state-dir", "", "per-sandbox host directories (default: as the backend chooses)")
	kind := addBackendFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := kind.check(); err != nil {
		return err
	}
	switch kind.kind {
	case backendContainerd:
		n, err := containerd.GC(ctx, containerd.Config{Config: host.Config{StateDir: *state}})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "gc: removed %d leftover sandbox(es) in containerd\n", n)
		return nil
	case backendKube:
		n, err := kube.GC(ctx, kind.kubeConfig(backendOptions{}))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "gc: deleted %d leftover sandbox pod(s) in namespace %s\n", n, kind.namespace)
		return nil
	}
	b, err := docker.New(ctx, docker.Config{StateDir: *state})
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	// New already reaped once; a second pass reports what is left (normally 0).
	n, err := b.Reap(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "gc: removed %d leftover sandbox(es)\n", n)
	pruned, err := b.PruneSealed(ctx)
	for _, ref := range pruned {
		fmt.Fprintf(stdout, "gc: removed sealed image %s (its task image was rebuilt or removed)\n", ref)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "gc: removed %d stale sealed image(s)\n", len(pruned))
	return nil
}

func runImages(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("images", "", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	tasks, _, err := demo.Tasks()
	if err != nil {
		return err
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer cli.Close()
	refs := []string{"rollcage/base:latest"}
	for _, t := range tasks {
		refs = append(refs, t.Image)
	}
	missing := 0
	for _, ref := range refs {
		img, err := cli.ImageInspect(ctx, ref)
		switch {
		case cerrdefs.IsNotFound(err):
			missing++
			fmt.Fprintf(stdout, "missing  %s\n", ref)
		case err != nil:
			return fmt.Errorf("%w: no Docker engine reachable: run 'make docker' or start dockerd (%v)", sandbox.ErrUnavailable, err)
		default:
			fmt.Fprintf(stdout, "present  %-36s %s  %4d MB\n", ref, strings.TrimPrefix(img.ID, "sha256:")[:12], img.Size>>20)
		}
	}
	if missing > 0 {
		return &exitError{Code: 1, Err: fmt.Errorf("%d image(s) missing: run 'make images'", missing)}
	}
	return nil
}

func runSandbox(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := subcommand(args, "exec", "usage: rollcage sandbox exec --image IMAGE [--session S] [--timeout D] [COMMAND ...]  (no command: read commands from stdin, one per line)", stderr); err != nil {
		return err
	}
	fs := newFlags("sandbox exec", "--image IMAGE [flags] [COMMAND ...]", stderr)
	image := fs.String("image", "rollcage/base:latest", "image to start")
	session := fs.String("session", "", "shell session name")
	timeout := fs.Duration("timeout", 60*time.Second, "per-command timeout")
	network := fs.String("network", sandbox.NetworkNone, "network mode: none")
	kind := addBackendFlag(fs)
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	b, err := openBackend(ctx, backendOptions{flags: kind})
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	sb, err := b.Create(ctx, sandbox.Spec{Image: *image, EpisodeID: fmt.Sprintf("debug-%d", os.Getpid()), Network: *network})
	if err != nil {
		return err
	}
	defer sb.Close(context.WithoutCancel(ctx))
	run := func(cmd string) error {
		r, err := sb.Exec(ctx, sandbox.ExecRequest{Session: *session, Command: cmd, Timeout: *timeout})
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, r.Output)
		if r.Output != "" && !strings.HasSuffix(r.Output, "\n") {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stderr, "[exit %d%s, %s, cwd %s]\n", r.ExitCode, stoppedNote(r.Stopped), r.Duration.Round(time.Millisecond), r.Cwd)
		return nil
	}
	if rest := fs.Args(); len(rest) > 0 {
		return run(strings.Join(rest, " "))
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if err := run(sc.Text()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func stoppedNote(s string) string {
	if s == "" {
		return ""
	}
	return ", stopped: " + s
}

// byteSize is a flag value in bytes written as 64M, 10G, 512K or plain bytes.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	mult := int64(1)
	num := strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B")
	if u := strings.TrimSuffix(num, "I"); len(u) < len(num) && strings.ContainsAny(u[max(len(u)-1, 0):], "KMGT") {
		num = u // 10GiB
	}
	if n := len(num); n > 0 {
		switch num[n-1] {
		case 'K':
			mult, num = 1<<10, num[:n-1]
		case 'M':
			mult, num = 1<<20, num[:n-1]
		case 'G':
			mult, num = 1<<30, num[:n-1]
		case 'T':
			mult, num = 1<<40, num[:n-1]
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a size: write it like 64M or 10G", s)
	}
	*b = byteSize(v * mult)
	return nil
}

// addDiskFlag is --disk-limit, the per-sandbox disk limit.
func addDiskFlag(fs *flag.FlagSet) *byteSize {
	b := byteSize(0)
	fs.Var(&b, "disk-limit", "per-sandbox disk limit on the writable layer and /tmp, like 64M or 10G (default 10G)")
	return &b
}
