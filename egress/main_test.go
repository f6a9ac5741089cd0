package egress

import (
	"testing"

	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestMain removes the agent the Docker-backed tests built, if they did.
func TestMain(m *testing.M) { sandboxtest.Main(m) }
