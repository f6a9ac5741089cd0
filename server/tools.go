package server

import (
	"encoding/json"

	"github.com/rollcage/rollcage/monitor"
)

// Tool is one tool the policy may call, in OpenAI's function-tool format
// (MCP's tools/list carries the same name, description and schema).
type Tool struct {
	Type     string       `json:"type"` // "function"
	Function ToolFunction `json:"function"`
}

// ToolFunction is a Tool's name, description and JSON schema.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// toolDefs are the typed tools of monitor's call model. The schemas match
// monitor's argument structs field for field: the monitor rejects unknown
// fields.
var toolDefs = []ToolFunction{
	{monitor.ToolBash, "Run a bash command in a persistent shell (cd and exported variables persist). Output is stdout and stderr interleaved.",
		json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"the command"},"timeout_sec":{"type":"number","description":"optional timeout in seconds"}},"required":["command"],"additionalProperties":false}`)},
	{monitor.ToolReadFile, "Read a text file.",
		json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"absolute, or relative to the shell's directory"}},"required":["path"],"additionalProperties":false}`)},
	{monitor.ToolWriteFile, "Create or overwrite a file with the given content.",
		json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"],"additionalProperties":false}`)},
	{monitor.ToolEdit, "Replace the one occurrence of old with new in a file (old must match exactly, whitespace included, and be unique).",
		json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"old":{"type":"string"},"new":{"type":"string"}},"required":["path","old","new"],"additionalProperties":false}`)},
	{monitor.ToolListDir, "List a directory.",
		json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"absolute, or relative to the shell's directory"}},"required":["path"],"additionalProperties":false}`)},
	{monitor.ToolSubmit, "Submit your work when the fix is complete. Ends the episode.",
		json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"optional note on what you changed"}},"additionalProperties":false}`)},
}

// foreignToolDefs are tools of other harnesses' vocabularies the MCP
// endpoint also takes (OpenHands and SWE-agent name them so), mapped by
// monitor.FromForeign; /calls takes every name it maps.
var foreignToolDefs = []ToolFunction{
	{"execute_bash", "OpenHands' name for bash: run a command in the persistent shell.",
		json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"},"is_input":{"type":"string"}},"required":["command"]}`)},
	{"str_replace_editor", "OpenHands' and SWE-agent's file editor: view, create, str_replace, insert.",
		json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","enum":["view","create","str_replace","insert","undo_edit"]},"path":{"type":"string"},"file_text":{"type":"string"},"old_str":{"type":"string"},"new_str":{"type":"string"},"insert_line":{"type":"integer"},"view_range":{"type":"array","items":{"type":"integer"}}},"required":["command","path"]}`)},
}

// Tools returns the tools in OpenAI's format, for the trainer to offer
// its model.
func Tools() []Tool {
	out := make([]Tool, len(toolDefs))
	for i, f := range toolDefs {
		out[i] = Tool{Type: "function", Function: f}
	}
	return out
}
