//go:build kube

package kube

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// Environment of the cluster tests (scripts/kube-up.sh env prints it;
// the image is sandboxtest.ImageEnv).
const (
	envNamespace = "ROLLCAGE_KUBE_NAMESPACE"
	envNode      = "ROLLCAGE_KUBE_NODE"
)

var testImage = sandboxtest.TestImage

// testConfig is the cluster of the environment; without one the test
// fails under CI=true and skips elsewhere.
func testConfig(t testing.TB) Config {
	t.Helper()
	sandboxtest.SkipShort(t, "a Kubernetes cluster")
	if os.Getenv("KUBECONFIG") == "" {
		sandboxtest.Unavailable(t, "no cluster: KUBECONFIG is unset; run scripts/kube-up.sh and eval \"$(scripts/kube-up.sh env)\" (or make kube-test)")
	}
	return Config{Namespace: os.Getenv(envNamespace), Node: os.Getenv(envNode), Config: host.Config{Logger: sandboxtest.Logger(t, slog.LevelInfo)}}
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
	sandboxtest.CloseAtCleanup(t, b)
	return b
}
