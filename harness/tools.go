package harness

import (
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/toolcall"
)

// Tools returns rollcage's own tools, in the order they are offered: the
// monitor's registry, which the built-in loop offers too. The gateway
// reads the tool list here, so that it reaches the monitor only through
// the harness.
func Tools() []toolcall.Tool { return monitor.Tools() }

// ForeignTools returns the tools of other harnesses' vocabularies that
// the MCP endpoint offers besides rollcage's own (the monitor maps their
// calls onto rollcage's tools).
func ForeignTools() []toolcall.Tool { return monitor.ForeignTools() }
