package docker

import (
	"context"
	"slices"

	"github.com/docker/docker/api/types/image"
)

// PruneSealed removes the sealed images whose source image no tag names
// any more: the task image was rebuilt (make images) or removed. Seal
// finds a sealed image only through its source's current id, so those
// are never used again. Sealed images of a current source are kept, even
// when a changed seal script or base gives the source a new key (gc does
// not know the tasks); remove them by hand. It returns the images
// removed.
func (b *Backend) PruneSealed(ctx context.Context) ([]string, error) {
	if err := b.core.Slots.CheckOpen("prune sealed images"); err != nil {
		return nil, err
	}
	imgs, err := b.cli.ImageList(ctx, image.ListOptions{})
	if err != nil {
		return nil, b.engineErr("prune sealed images: list", err)
	}
	current := map[string]bool{} // ids of tagged images that are not sealed ones
	for _, im := range imgs {
		if _, sealed := im.Labels[LabelSealSource]; !sealed && len(tags(im)) > 0 {
			current[im.ID] = true
		}
	}
	var removed []string
	for _, im := range imgs {
		src, sealed := im.Labels[LabelSealSource]
		if !sealed || current[src] {
			continue
		}
		refs := tags(im)
		if len(refs) == 0 {
			refs = []string{im.ID}
		}
		for _, ref := range refs {
			if _, err := b.cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true}); err != nil {
				return removed, b.engineErr("prune sealed images: remove "+ref, err)
			}
			removed = append(removed, ref)
		}
	}
	return removed, nil
}

// tags are an image's repository tags, without the placeholder an
// untagged image lists.
func tags(im image.Summary) []string {
	return slices.DeleteFunc(slices.Clone(im.RepoTags), func(t string) bool { return t == "<none>:<none>" })
}
