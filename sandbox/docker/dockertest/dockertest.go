package dockertest

import (
	"context"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/docker"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// Backend returns a Docker backend for t, closed when the test ends. It
// fails t under CI=true and skips it elsewhere when no engine answers, and
// builds the in-container agent when $ROLLCAGE_AGENT_BIN names none (once
// per test binary; that build stays in a temporary directory unless the
// package's TestMain runs sandboxtest.EnsureAgent's cleanup).
func Backend(t testing.TB) sandbox.Backend {
	t.Helper()
	sandboxtest.RequireDocker(t)
	if _, err := sandboxtest.EnsureAgent(); err != nil {
		t.Fatal(err)
	}
	b, err := docker.New(context.Background(), docker.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b.Close(ctx)
	})
	return b
}
