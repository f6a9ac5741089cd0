package audit

import (
	"encoding/json"

	"github.com/rollcage/rollcage/monitor"
)

// mapTool turns a foreign tool call into one of rollcage's tool model
// (monitor.FromForeign: the mapping the gateway also takes).
func mapTool(name, rawArgs string) monitor.ToolCall { return monitor.FromForeign(name, rawArgs) }

// editorCall maps the str_replace_editor family by its sub-command.
func editorCall(cmd, path, fileText, oldStr, newStr string) monitor.ToolCall {
	return monitor.EditorCall(cmd, path, fileText, oldStr, newStr)
}

func bash(cmd string) monitor.ToolCall {
	return call(monitor.ToolBash, monitor.BashArgs{Command: cmd})
}

func call(tool string, args any) monitor.ToolCall {
	b, _ := json.Marshal(args)
	return monitor.ToolCall{Tool: tool, Args: b}
}
