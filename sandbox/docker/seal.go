package docker

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// sealScript seals the repository of a throw-away container (see its
// header); it is part of the sealed images' cache key.
//
//go:embed seal.sh
var sealScript string

// Labels of a sealed image. They are host-side metadata: a sandbox has no
// Docker socket and labels are not in its filesystem, so the facts the probe
// took before sealing (future commit ids, the fix's lines) stay out of the
// policy's reach while travelling with the image they describe. A cache file
// on the host could outlive or miss its image; a label cannot.
const (
	LabelSealKey    = "rollcage.seal.key"    // content hash the tag ends with
	LabelSealSource = "rollcage.seal.source" // id of the unsealed image
	LabelSealFacts  = "rollcage.seal.facts"  // base64 of the gzipped probe output
	LabelSealLog    = "rollcage.seal.log"    // the seal script's before/after counts
)

// SealedRepo is the repository of sealed images; tags are
// <source name>-<content hash>.
const SealedRepo = "rollcage/sealed"

// Seal returns the sealed image of spec.Image, sealing it first when no
// image with the same content hash (source image id, seal script, probe
// and its arguments, workdir, base) is present. Concurrent calls for the
// same key seal once.
func (b *Backend) Seal(ctx context.Context, spec sandbox.SealSpec) (sandbox.Sealed, error) {
	if err := b.core.Slots.CheckOpen("seal"); err != nil {
		return sandbox.Sealed{}, err
	}
	if spec.Image == "" {
		return sandbox.Sealed{}, errors.New("docker: seal: spec has no image: set SealSpec.Image")
	}
	if spec.Workdir == "" {
		spec.Workdir = hostside.DefaultWorkdir
	}
	src, err := b.cli.ImageInspect(ctx, spec.Image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return sandbox.Sealed{}, fmt.Errorf("docker: seal: image %s not found locally: run 'make images' or build it: %w", spec.Image, sandbox.ErrImageMissing)
		}
		return sandbox.Sealed{}, b.engineErr("seal: inspect "+spec.Image, err)
	}
	key := sealKey(src.ID, spec)
	ref := SealedRepo + ":" + sealTagName(spec.Image) + "-" + key
	if v, ok := b.sealed.Load(key); ok {
		s := v.(sandbox.Sealed)
		if _, err := b.cli.ImageInspect(ctx, s.Image); err == nil {
			s.Cached, s.Took = true, 0
			return s, nil
		}
		b.sealed.Delete(key) // removed since: seal again
	}
	v, err, _ := b.sealing.Do(key, func() (any, error) {
		s, ok, err := b.sealedImage(ctx, ref, key)
		if err != nil {
			return s, err
		}
		if !ok {
			if s, err = b.seal(ctx, spec, src, ref, key); err != nil {
				return s, err
			}
		}
		b.sealed.Store(key, s)
		return s, nil
	})
	if err != nil {
		return sandbox.Sealed{}, err
	}
	return v.(sandbox.Sealed), nil
}

// sealKey is the content hash of everything that decides a sealed image.
func sealKey(srcID string, spec sandbox.SealSpec) string {
	h := sha256.New()
	parts := append([]string{srcID, sealScript, spec.Workdir, spec.Base, spec.Probe}, spec.ProbeArgs...)
	if len(spec.Remove) > 0 {
		// Appended only when set, so the keys of images sealed before
		// Remove existed stay the same.
		parts = append(append(parts, "remove"), spec.Remove...)
	}
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// sealTagName is the source reference reduced to a readable tag prefix:
// rollcage/demo-textwrap:latest → demo-textwrap-latest.
func sealTagName(ref string) string {
	ref = strings.TrimPrefix(ref, "rollcage/")
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	b := []byte(ref)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			b[i] = '-'
		}
	}
	s := strings.Trim(string(b), "-.")
	if len(s) > 100 {
		s = s[:100]
	}
	if s == "" {
		s = "image"
	}
	return s
}

// sealedImage reads a present sealed image's facts; ok is false when ref is
// absent (or is not the sealed image of key).
func (b *Backend) sealedImage(ctx context.Context, ref, key string) (s sandbox.Sealed, ok bool, err error) {
	img, err := b.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return s, false, nil
	}
	if err != nil {
		return s, false, b.engineErr("seal: inspect "+ref, err)
	}
	var labels map[string]string
	if img.Config != nil {
		labels = img.Config.Labels
	}
	if labels[LabelSealKey] != key {
		return s, false, nil
	}
	facts, err := decodeFacts(labels[LabelSealFacts])
	if err != nil {
		return s, false, fmt.Errorf("docker: seal: %s: label %s: %w (remove the image to seal again)", ref, LabelSealFacts, err)
	}
	return sandbox.Sealed{Image: ref, Source: labels[LabelSealSource], Facts: facts, Cached: true, Log: labels[LabelSealLog]}, true, nil
}

// seal runs the seal script in a container of src and commits the result
// as ref, with the probe's output in a label.
func (b *Backend) seal(ctx context.Context, spec sandbox.SealSpec, src image.InspectResponse, ref, key string) (sandbox.Sealed, error) {
	start := time.Now()
	var orig dcontainer.Config
	if src.Config != nil {
		orig.Entrypoint, orig.Cmd, orig.WorkingDir, orig.User = src.Config.Entrypoint, src.Config.Cmd, src.Config.WorkingDir, src.Config.User
	}
	// The commit keeps what the container ran unless told otherwise, and
	// an empty ENTRYPOINT cannot be told: an image without one is sealed
	// by a command, an image with one by overriding it (and putting it
	// back at the commit).
	script, err := removeScript(spec.Remove)
	if err != nil {
		return sandbox.Sealed{}, fmt.Errorf("docker: seal %s: %w", spec.Image, err)
	}
	argv := append([]string{"/bin/sh", "-c", script + sealScript, "rollcage-seal", spec.Probe, spec.Workdir, spec.Base}, spec.ProbeArgs...)
	changes := []string{"CMD " + jsonList(orig.Cmd), "USER " + cmpStr(orig.User, "0:0")}
	var entry, cmd []string
	if len(orig.Entrypoint) == 0 {
		cmd = argv
	} else {
		entry, cmd = argv[:4], argv[4:]
		changes = append(changes, "ENTRYPOINT "+jsonList(orig.Entrypoint))
	}
	cfg := &dcontainer.Config{
		Image:           src.ID,
		User:            "0:0",
		Entrypoint:      entry,
		Cmd:             cmd,
		WorkingDir:      orig.WorkingDir,
		NetworkDisabled: true,
		// No labels: a commit would copy the container's into the image.
	}
	host := &dcontainer.HostConfig{
		NetworkMode: "none",
		LogConfig:   dcontainer.LogConfig{Type: "json-file"},
	}
	name := "rollcage-seal-" + key + "-" + randomToken()
	resp, err := b.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if err != nil {
		return sandbox.Sealed{}, b.engineErr("seal: create "+name, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		defer cancel()
		if err := b.cli.ContainerRemove(rctx, resp.ID, dcontainer.RemoveOptions{Force: true}); err != nil {
			b.log.Warn("seal: remove container", "container", name, "err", err)
		}
	}()
	if err := b.cli.ContainerStart(ctx, resp.ID, dcontainer.StartOptions{}); err != nil {
		return sandbox.Sealed{}, b.engineErr("seal: start "+name, err)
	}
	waitC, errC := b.cli.ContainerWait(ctx, resp.ID, dcontainer.WaitConditionNotRunning)
	var code int64
	select {
	case w := <-waitC:
		code = w.StatusCode
	case err := <-errC:
		return sandbox.Sealed{}, b.engineErr("seal: wait "+name, err)
	}
	rc, err := b.cli.ContainerLogs(ctx, resp.ID, dcontainer.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return sandbox.Sealed{}, b.engineErr("seal: logs "+name, err)
	}
	var stdout, stderr bytes.Buffer
	_, err = stdcopy.StdCopy(&stdout, &stderr, rc)
	rc.Close()
	if err != nil {
		return sandbox.Sealed{}, fmt.Errorf("docker: seal: read output of %s: %w", name, err)
	}
	slog := strings.TrimSpace(stderr.String())
	if code != 0 {
		return sandbox.Sealed{}, fmt.Errorf("docker: seal %s: the seal script exited %d: %s (use --no-seal to run on the image as it is)", spec.Image, code, lastLines(slog, 5))
	}
	facts, err := encodeFacts(stdout.String())
	if err != nil {
		return sandbox.Sealed{}, fmt.Errorf("docker: seal %s: %w", spec.Image, err)
	}
	labels := map[string]string{LabelSealKey: key, LabelSealSource: src.ID, LabelSealFacts: facts, LabelSealLog: slog}
	_, err = b.cli.ContainerCommit(ctx, resp.ID, dcontainer.CommitOptions{
		Reference: ref,
		Comment:   "rollcage: sealed " + spec.Image,
		Config:    &dcontainer.Config{Labels: labels},
		Changes:   changes,
	})
	if err != nil {
		return sandbox.Sealed{}, b.engineErr("seal: commit "+ref, err)
	}
	took := time.Since(start)
	b.log.Info("sealed image", "image", spec.Image, "sealed", ref, "took", took.Round(time.Millisecond), "log", slog)
	return sandbox.Sealed{Image: ref, Source: src.ID, Facts: stdout.String(), Took: took, Log: slog}, nil
}

// removeScript is the shell run before the seal script for
// SealSpec.Remove (the seal script may end early, when there is no
// repository to seal): it deletes each path and fails (exit 6) when one
// is still there. A relative path or one naming the root is refused.
func removeScript(paths []string) (string, error) {
	if len(paths) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("# SealSpec.Remove\n")
	for _, p := range paths {
		if !strings.HasPrefix(p, "/") || strings.Trim(p, "/.") == "" || strings.Contains(p, "'") {
			return "", fmt.Errorf("remove %q: give an absolute path below / without quotes", p)
		}
		q := "'" + p + "'"
		fmt.Fprintf(&b, "rm -rf -- %s\nif [ -e %s ] || [ -L %s ]; then echo \"rollcage-seal: %s is still there after removal\" >&2; exit 6; fi\necho \"rollcage-seal: removed %s\" >&2\n", q, q, q, p, p)
	}
	return b.String(), nil
}

func jsonList(l []string) string {
	if l == nil {
		l = []string{}
	}
	b, _ := json.Marshal(l)
	return string(b)
}

func cmpStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// encodeFacts gzips and base64-encodes the probe output for a label.
func encodeFacts(s string) (string, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := io.WriteString(zw, s); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

func decodeFacts(s string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("decode: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return "", fmt.Errorf("decode: %w", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		return "", fmt.Errorf("decode: %w", err)
	}
	return string(out), nil
}
