package containerd

import (
	"context"
	"fmt"
	"sync"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	dockerclient "github.com/docker/docker/client"
	"golang.org/x/sync/singleflight"

	"github.com/rollcage/rollcage/sandbox"
)

// imageCache remembers which images were checked against Docker's store
// in this backend's lifetime, and makes one resolution per image at a time.
type imageCache struct {
	group singleflight.Group
	mu    sync.Mutex
	fresh map[string]bool // guarded by mu; name → checked against Docker
}

func (c *imageCache) isFresh(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fresh[name]
}

func (c *imageCache) setFresh(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fresh == nil {
		c.fresh = map[string]bool{}
	}
	c.fresh[name] = true
}

// imageName is containerd's name of an image reference
// (rollcage/base:latest is docker.io/rollcage/base:latest).
func imageName(ref string) (string, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", fmt.Errorf("image %q: %w: name an image like rollcage/base:latest", ref, err)
	}
	return named.String(), nil
}

// image returns ref from the namespace's image store, unpacked into the
// snapshotter; with ImportFromDocker, imported first when missing or when
// Docker's copy differs (once per backend and image).
func (b *Backend) image(ctx context.Context, ref string) (client.Image, error) {
	name, err := imageName(ref)
	if err != nil {
		return nil, err
	}
	v, err, _ := b.images.group.Do(name, func() (any, error) {
		return b.resolveImage(context.WithoutCancel(ctx), ref, name)
	})
	if err != nil {
		return nil, err
	}
	return v.(client.Image), nil
}

func (b *Backend) resolveImage(ctx context.Context, ref, name string) (client.Image, error) {
	img, err := b.cli.GetImage(ctx, name)
	if err != nil && !cerrdefs.IsNotFound(err) {
		return nil, b.engineErr("image "+ref, err)
	}
	present := err == nil
	if b.cfg.ImportFromDocker && !b.images.isFresh(name) {
		img, err = b.importFromDocker(ctx, ref, name, img)
		switch {
		case err == nil:
			present = true
			b.images.setFresh(name)
		case present:
			b.log.Warn("image: cannot compare with Docker's copy; using containerd's", "image", ref, "err", err)
		default:
			return nil, err
		}
	}
	if !present {
		return nil, fmt.Errorf("image %s is not in containerd's namespace %q: import it (docker save %s | ctr -n %s images import -) or let rollcage import it from Docker (--backend containerd does): %w",
			ref, b.cfg.Namespace, ref, b.cfg.Namespace, sandbox.ErrImageMissing)
	}
	unpacked, err := img.IsUnpacked(ctx, b.cfg.Snapshotter)
	if err != nil {
		return nil, b.engineErr("image "+ref+": unpacked?", err)
	}
	if !unpacked {
		if err := img.Unpack(ctx, b.cfg.Snapshotter); err != nil {
			return nil, b.engineErr("image "+ref+": unpack", err)
		}
	}
	return img, nil
}

// importFromDocker imports ref from the Docker engine of the environment
// unless have (the namespace's copy, nil when none) is already the same
// image: same config digest, which is Docker's image id.
func (b *Backend) importFromDocker(ctx context.Context, ref, name string, have client.Image) (client.Image, error) {
	dcli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("image %s: no Docker engine to import it from: %w: %v", ref, sandbox.ErrImageMissing, err)
	}
	defer dcli.Close()
	st, err := dcli.ImageInspect(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("image %s not found locally (neither in containerd nor in Docker): run 'make images': %w", ref, sandbox.ErrImageMissing)
		}
		return nil, fmt.Errorf("image %s: Docker, to import it from, does not answer: run 'make docker' or import it by hand (docker save %s | ctr -n %s images import -): %w: %v", ref, ref, b.cfg.Namespace, sandbox.ErrImageMissing, err)
	}
	if have != nil {
		if cfg, err := have.Config(ctx); err == nil && cfg.Digest.String() == st.ID {
			return have, nil
		}
	}
	rc, err := dcli.ImageSave(ctx, []string{ref})
	if err != nil {
		return nil, fmt.Errorf("image %s: docker save: %w", ref, err)
	}
	defer rc.Close()
	imported, err := b.cli.Import(ctx, rc)
	if err != nil {
		return nil, b.engineErr("image "+ref+": import from Docker", err)
	}
	img, err := b.cli.GetImage(ctx, name)
	if cerrdefs.IsNotFound(err) && len(imported) > 0 {
		// The archive named it otherwise: name it as it is asked for.
		rec := images.Image{Name: name, Target: imported[0].Target}
		if _, err := b.cli.ImageService().Create(ctx, rec); err != nil && !cerrdefs.IsAlreadyExists(err) {
			return nil, b.engineErr("image "+ref+": name the import", err)
		}
		img, err = b.cli.GetImage(ctx, name)
	}
	if err != nil {
		return nil, b.engineErr("image "+ref+": after import", err)
	}
	b.log.Info("image imported from Docker", "image", ref, "id", st.ID)
	return img, nil
}
