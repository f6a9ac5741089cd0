package containerd

import (
	"context"
	"testing"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	var b *Backend
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		b = newTestBackend(t, Config{})
		return b
	}, sandboxtest.Options{
		Image: testImage(),
		Fork:  true,
		RemoveImage: func(ctx context.Context, ref string) error {
			return b.RemoveImage(ctx, ref)
		},
		Labels: func(ctx context.Context, sb sandbox.Sandbox) (map[string]string, error) {
			return sb.(*container).ctr.Labels(b.ctx(ctx))
		},
	})
}
