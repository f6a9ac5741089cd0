package e2b_test

import (
	"testing"

	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestMain removes the agent the Docker-backed test built, if it did.
func TestMain(m *testing.M) { sandboxtest.Main(m) }
