//go:build kube

package kube

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// Environment of the cluster tests (scripts/kube-up.sh env prints it).
const (
	envNamespace = "ROLLCAGE_KUBE_NAMESPACE"
	envNode      = "ROLLCAGE_KUBE_NODE"
	envImage     = "ROLLCAGE_TEST_IMAGE"
)

func testImage() string {
	if img := os.Getenv(envImage); img != "" {
		return img
	}
	return "rollcage/base:latest"
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// testConfig is the cluster of the environment; without one the test
// fails under CI=true and skips elsewhere.
func testConfig(t testing.TB) Config {
	t.Helper()
	if os.Getenv("KUBECONFIG") == "" {
		sandboxtest.Unavailable(t, "no cluster: KUBECONFIG is unset; run scripts/kube-up.sh and eval \"$(scripts/kube-up.sh env)\" (or make kube-test)")
	}
	return Config{Namespace: os.Getenv(envNamespace), Node: os.Getenv(envNode), Logger: testLogger(t)}
}

// newTestBackend connects to the cluster, failing under CI (skipping
// elsewhere) when no API server answers, and closes the backend at the end.
func newTestBackend(t testing.TB, cfg Config) *Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := New(ctx, cfg)
	if err != nil {
		sandboxtest.Unavailable(t, "kubernetes backend: "+err.Error())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("backend Close: %v", err)
		}
	})
	return b
}
