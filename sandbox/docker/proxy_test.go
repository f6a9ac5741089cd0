package docker

import (
	"testing"

	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

func TestProxyMode(t *testing.T) {
	sandboxtest.ProxyMode(t, newTestBackend(t, Config{}), testImage())
}
