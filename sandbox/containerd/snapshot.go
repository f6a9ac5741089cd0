package containerd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/labels"
	"github.com/containerd/containerd/v2/pkg/rootfs"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

func (b *Backend) snapshotter() snapshots.Snapshotter {
	return b.cli.SnapshotService(b.cfg.Snapshotter)
}

// upperDir is the writable directory of the active snapshot key on the
// host, or an error wrapping ErrUnsupported saying what rollcage needs.
func (b *Backend) upperDir(ctx context.Context, key string) (string, error) {
	mounts, err := b.snapshotter().Mounts(ctx, key)
	if err != nil {
		return "", b.engineErr("snapshot mounts of "+key, err)
	}
	for _, m := range mounts {
		switch m.Type {
		case "overlay":
			for _, o := range m.Options {
				if dir, ok := strings.CutPrefix(o, "upperdir="); ok {
					return dir, nil
				}
			}
		case "bind":
			return m.Source, nil // a snapshot without parents
		}
	}
	return "", fmt.Errorf("containerd: snapshotter %q shows no writable directory for %s (mounts %v): use the overlayfs snapshotter: %w", b.cfg.Snapshotter, key, mounts, sandbox.ErrUnsupported)
}

// limitBtrfs holds snapshot key of the btrfs snapshotter to limit bytes
// by its subvolume's quota group, found from the snapshot's mount (the
// device and subvolid=) and the device's mount point on the host.
func (b *Backend) limitBtrfs(ctx context.Context, key string, limit int64) error {
	mounts, err := b.snapshotter().Mounts(ctx, key)
	if err != nil {
		return b.engineErr("snapshot mounts of "+key, err)
	}
	for _, m := range mounts {
		if m.Type != "btrfs" {
			continue
		}
		for _, o := range m.Options {
			v, ok := strings.CutPrefix(o, "subvolid=")
			if !ok {
				continue
			}
			id, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("containerd: snapshot %s: mount option %q: %w", key, o, err)
			}
			dir, err := hostside.MountPointOf(m.Source, "btrfs")
			if err != nil {
				return fmt.Errorf("containerd: snapshot %s: %w", key, err)
			}
			if err := hostside.LimitQgroup(dir, id, limit); err != nil {
				return fmt.Errorf("containerd: snapshot %s: %w", key, err)
			}
			b.simpleOnce.Do(func() {
				if ok, err := hostside.BtrfsSimpleQuotas(dir); !ok {
					b.log.Warn(hostside.SimpleQuotaWarning, "root", dir, "err", err)
				}
			})
			return nil
		}
	}
	return fmt.Errorf("containerd: the btrfs snapshotter shows no subvolume for %s (mounts %v)", key, mounts)
}

// Snapshot commits the container's file system (mounts excluded, so
// neither the agent nor its socket end up in the image) as a new layer on
// its image, named ref in the namespace, and returns the image's config
// digest. The task is frozen while the layer is taken.
func (c *container) Snapshot(ctx context.Context, ref string) (string, error) {
	if c.IsClosed() {
		return "", c.ErrClosed("snapshot")
	}
	b := c.b
	name, err := imageName(ref)
	if err != nil {
		return "", c.Wrap("snapshot", err)
	}
	ctx = b.ctx(ctx)
	ctx, done, err := b.cli.WithLease(ctx)
	if err != nil {
		return "", c.Wrap("snapshot", b.engineErr("lease", err))
	}
	defer done(context.WithoutCancel(ctx))
	layer, err := c.diffPaused(ctx)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", c.ErrClosed("snapshot")
		}
		return "", c.Wrap("snapshot", err)
	}
	id, err := b.commitImage(ctx, c.Image, name, layer, "rollcage snapshot of "+c.id)
	if err != nil {
		return "", c.Wrap("snapshot", err)
	}
	b.images.setFresh(name) // ours, not Docker's: never imported over
	return id, nil
}

// diffPaused is the container's writable layer as a layer blob, taken with
// the task frozen.
func (c *container) diffPaused(ctx context.Context) (ocispec.Descriptor, error) {
	b := c.b
	if _, err := hostside.Freeze(ctx, c.Logger(), c.task.Pause); err != nil {
		return ocispec.Descriptor{}, b.engineErr("pause", err)
	}
	layer, derr := b.diff(ctx, c.snap)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	if err := c.task.Resume(rctx); err != nil {
		return layer, errors.Join(derr, b.engineErr("resume", err))
	}
	if derr != nil {
		return layer, b.engineErr("diff", derr)
	}
	return layer, nil
}

// diff is the layer of the active snapshot key over its image: of a fork's
// child, over the image under the fork layers it stands on, so that the
// parents' changes are in it too (the diff against its direct parent, a
// fork layer, would leave them out). That diff compares the two trees
// whole; any other is the snapshotter's upper directory as it is.
func (b *Backend) diff(ctx context.Context, key string) (ocispec.Descriptor, error) {
	sn := b.snapshotter()
	info, err := sn.Stat(ctx, key)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	base := info.Parent
	for strings.HasPrefix(base, forkBasePrefix) {
		pi, err := sn.Stat(ctx, base)
		if err != nil {
			return ocispec.Descriptor{}, err
		}
		base = pi.Parent
	}
	if base == info.Parent {
		return rootfs.CreateDiff(ctx, key, sn, b.cli.DiffService())
	}
	view := "rollcage-diff-view-" + hostside.RandomToken()
	lower, err := sn.View(ctx, view, base)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	defer sn.Remove(context.WithoutCancel(ctx), view)
	upper, err := sn.Mounts(ctx, key)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return b.cli.DiffService().Compare(ctx, lower, upper)
}

// commitImage writes an image named name: base's manifest and config with
// layer on top.
func (b *Backend) commitImage(ctx context.Context, base, name string, layer ocispec.Descriptor, comment string) (string, error) {
	img, err := b.image(ctx, base)
	if err != nil {
		return "", err
	}
	cs := b.cli.ContentStore()
	mf, err := images.Manifest(ctx, cs, img.Target(), platforms.Default())
	if err != nil {
		return "", b.engineErr("manifest of "+base, err)
	}
	raw, err := content.ReadBlob(ctx, cs, mf.Config)
	if err != nil {
		return "", b.engineErr("config of "+base, err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return "", fmt.Errorf("config of %s: %w", base, err)
	}
	info, err := cs.Info(ctx, layer.Digest)
	if err != nil {
		return "", b.engineErr("layer info", err)
	}
	diffID, err := digest.Parse(info.Labels[labels.LabelUncompressed])
	if err != nil {
		return "", fmt.Errorf("layer %s has no uncompressed digest: %w", layer.Digest, err)
	}
	now := time.Now().UTC()
	cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, diffID)
	cfg.History = append(cfg.History, ocispec.History{Created: &now, CreatedBy: "rollcage", Comment: comment})
	cfg.Created = &now
	cfgDesc, err := b.writeJSON(ctx, cfg, mf.Config.MediaType, nil)
	if err != nil {
		return "", err
	}
	mf.Config = cfgDesc
	mf.Layers = append(mf.Layers, layer)
	gc := map[string]string{"containerd.io/gc.ref.content.config": cfgDesc.Digest.String()}
	for i, l := range mf.Layers {
		gc["containerd.io/gc.ref.content.l."+strconv.Itoa(i)] = l.Digest.String()
	}
	mediaType := img.Target().MediaType
	if mediaType == ocispec.MediaTypeImageIndex || mediaType == images.MediaTypeDockerSchema2ManifestList {
		mediaType = mf.MediaType
		if mediaType == "" {
			mediaType = ocispec.MediaTypeImageManifest
		}
	}
	mfDesc, err := b.writeJSON(ctx, mf, mediaType, gc)
	if err != nil {
		return "", err
	}
	rec := images.Image{Name: name, Target: mfDesc, Labels: map[string]string{host.LabelManaged: "snapshot"}}
	is := b.cli.ImageService()
	if _, err := is.Create(ctx, rec); cerrdefs.IsAlreadyExists(err) {
		_, err = is.Update(ctx, rec, "target", "labels."+host.LabelManaged)
		if err != nil {
			return "", b.engineErr("update image "+name, err)
		}
	} else if err != nil {
		return "", b.engineErr("create image "+name, err)
	}
	return cfgDesc.Digest.String(), nil
}

// writeJSON writes v as a blob of mediaType with the given labels.
func (b *Backend) writeJSON(ctx context.Context, v any, mediaType string, lbls map[string]string) (ocispec.Descriptor, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(raw), Size: int64(len(raw))}
	if err := content.WriteBlob(ctx, b.cli.ContentStore(), desc.Digest.String(), bytes.NewReader(raw), desc, content.WithLabels(lbls)); err != nil {
		return desc, b.engineErr("write "+mediaType, err)
	}
	return desc, nil
}

// RemoveImage removes an image of the namespace (one Snapshot made); its
// content and snapshots go with containerd's garbage collection.
func (b *Backend) RemoveImage(ctx context.Context, ref string) error {
	name, err := imageName(ref)
	if err != nil {
		return err
	}
	if err := b.cli.ImageService().Delete(b.ctx(ctx), name); err != nil && !cerrdefs.IsNotFound(err) {
		return b.engineErr("remove image "+ref, err)
	}
	return nil
}

// ImageID is the config digest of the container's image.
func (c *container) ImageID(ctx context.Context) (string, error) {
	if c.IsClosed() {
		return "", c.ErrClosed("image id")
	}
	img, err := c.b.image(ctx, c.Image)
	if err != nil {
		return "", c.Wrap("image id", err)
	}
	cfg, err := img.Config(c.b.ctx(ctx))
	if err != nil {
		return "", c.Wrap("image id", c.b.engineErr("config", err))
	}
	return cfg.Digest.String(), nil
}
