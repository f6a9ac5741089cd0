package audit

import (
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/toolcall"
)

// The readers build calls of rollcage's tool model with their arguments
// kept typed (monitor.Prepared): the replay normalizes them without
// decoding the JSON it encoded them to (Step.prepared).

// mapTool turns a foreign tool call into one of rollcage's tool model
// (monitor.PrepareForeign: the mapping the gateway also takes).
func mapTool(name, rawArgs string) monitor.Prepared { return monitor.PrepareForeign(name, rawArgs) }

// editorCall maps the str_replace_editor family by its sub-command.
func editorCall(cmd, path, fileText, oldStr, newStr string) monitor.Prepared {
	return monitor.PrepareEditor(cmd, path, fileText, oldStr, newStr)
}

func bash(cmd string) monitor.Prepared {
	return call(toolcall.Bash, toolcall.BashArgs{Command: cmd})
}

func call[A any](tool string, args A) monitor.Prepared { return monitor.PrepareArgs(tool, args) }
