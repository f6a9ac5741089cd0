//go:build kube

package kube

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/sandbox"
)

// TestThirtyTwoAlive starts 32 sandboxes on the node at once (MaxCreating
// 8), checks that each answers with its own episode's marker, and logs how
// long it took.
func TestThirtyTwoAlive(t *testing.T) {
	const n = 32
	be := newTestBackend(t, testConfig(t))
	start := time.Now()
	sbs := make([]sandbox.Sandbox, n)
	var g errgroup.Group
	for i := range n {
		g.Go(func() error {
			sb, err := be.Create(t.Context(), sandbox.Spec{Image: testImage(), EpisodeID: fmt.Sprintf("scale-%d", i), Env: map[string]string{"MARK": fmt.Sprint(i)}})
			sbs[i] = sb
			return err
		})
	}
	err := g.Wait()
	for _, sb := range sbs {
		if sb != nil {
			defer sb.Close(context.Background())
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pods alive in %v", n, time.Since(start))
	if got := be.Stats().Alive; got != n {
		t.Errorf("Stats().Alive = %d, want %d", got, n)
	}
	for i, sb := range sbs {
		res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo $MARK"})
		if err != nil || strings.TrimSpace(res.Output) != fmt.Sprint(i) {
			t.Errorf("sandbox %d: %q, %v", i, res.Output, err)
		}
	}
}
