package server

import (
	"encoding/json"

	"github.com/rollcage/rollcage/toolcall"
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

// Tools returns the tools in OpenAI's format, for the trainer to offer
// its model: toolcall's registry (toolcall.Tools), as MCP and the
// built-in loop offer them.
func Tools() []Tool {
	ts := toolcall.Tools()
	out := make([]Tool, len(ts))
	for i, t := range ts {
		out[i] = Tool{Type: "function", Function: ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.Schema}}
	}
	return out
}
