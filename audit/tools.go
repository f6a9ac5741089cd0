package audit

import (
	"encoding/json"

	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/toolcall"
)

// mapTool turns a foreign tool call into one of rollcage's tool model
// (monitor.FromForeign: the mapping the gateway also takes).
func mapTool(name, rawArgs string) toolcall.Call { return monitor.FromForeign(name, rawArgs) }

// editorCall maps the str_replace_editor family by its sub-command.
func editorCall(cmd, path, fileText, oldStr, newStr string) toolcall.Call {
	return monitor.EditorCall(cmd, path, fileText, oldStr, newStr)
}

func bash(cmd string) toolcall.Call {
	return call(toolcall.Bash, toolcall.BashArgs{Command: cmd})
}

func call(tool string, args any) toolcall.Call {
	b, _ := json.Marshal(args)
	return toolcall.Call{Tool: tool, Args: b}
}
