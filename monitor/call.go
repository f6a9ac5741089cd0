package monitor

import "github.com/rollcage/rollcage/toolcall"

// Tool names of the typed tool-call model (the registry in registry.go
// says what each takes and does). Any other name is a generic tool whose
// Args are passed to the rules as JSON.
const (
	ToolBash      = "bash"
	ToolReadFile  = "read_file"
	ToolWriteFile = "write_file"
	ToolEdit      = "edit" // str_replace-style: replace Old with New in Path
	ToolListDir   = "list_dir"
	ToolSubmit    = "submit"
)

// ToolCall is one call of a tool by the policy, as it reaches the monitor
// (see toolcall.Call).
type ToolCall = toolcall.Call

// Normalized is what the monitor makes of a call before the rules see it
// (see toolcall.Normalized).
type Normalized = toolcall.Normalized

// Command is one simple command of a Normalized call.
type Command = toolcall.Command

// GitOp is one git invocation of a Normalized call.
type GitOp = toolcall.GitOp

// The argument types below are the tools' JSON schemas too (Tools derives
// them): a jsonschema tag is a field's description.

// BashArgs are the arguments of ToolBash.
type BashArgs struct {
	Command string `json:"command" jsonschema:"the command"`
	// TimeoutSec overrides the episode's per-call timeout when > 0.
	TimeoutSec float64 `json:"timeout_sec,omitempty" jsonschema:"optional timeout in seconds"`
}

// ReadFileArgs are the arguments of ToolReadFile.
type ReadFileArgs struct {
	Path string `json:"path" jsonschema:"absolute, or relative to the shell's directory"`
}

// WriteFileArgs are the arguments of ToolWriteFile.
type WriteFileArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// EditArgs are the arguments of ToolEdit: replace the one occurrence of Old
// in Path with New.
type EditArgs struct {
	Path string `json:"path"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// ListDirArgs are the arguments of ToolListDir.
type ListDirArgs struct {
	Path string `json:"path" jsonschema:"absolute, or relative to the shell's directory"`
}

// SubmitArgs are the arguments of ToolSubmit.
type SubmitArgs struct {
	Message string `json:"message,omitempty" jsonschema:"optional note on what you changed"`
}
