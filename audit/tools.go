package audit

import (
	"github.com/rollcage/rollcage/toolcall"
)

// The readers build calls of rollcage's tool model with their arguments
// kept typed (toolcall.Prepared): the replay normalizes them without
// decoding the JSON it encoded them to (Step.prepared).

// mapTool turns a foreign tool call into one of rollcage's tool model
// (toolcall.PrepareForeign: the mapping the gateway also takes).
func mapTool(name, rawArgs string) toolcall.Prepared { return toolcall.PrepareForeign(name, rawArgs) }

// editorCall maps the str_replace_editor family by its sub-command.
func editorCall(cmd, path, fileText, oldStr, newStr string) toolcall.Prepared {
	return toolcall.PrepareEditor(cmd, path, fileText, oldStr, newStr)
}

func bash(cmd string) toolcall.Prepared {
	return call(toolcall.Bash, toolcall.BashArgs{Command: cmd})
}

func call[A any](tool string, args A) toolcall.Prepared { return toolcall.PrepareArgs(tool, args) }
