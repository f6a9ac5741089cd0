package toolcall

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// registry is rollcage's own tools, in the order they are offered.
var registry = []Tool{
	tool[BashArgs](Bash, "Run a bash command in a persistent shell (cd and exported variables persist). Output is stdout and stderr interleaved.",
		"bash", "execute_bash", "shell", "run_command", "run_shell_command", "terminal", "execute_command", "exec_command", "run_bash", "local_shell", "container.exec", "cmd"),
	tool[ReadFileArgs](ReadFile, "Read a text file.",
		"read_file", "view_file", "open_file", "read", "cat_file"),
	tool[WriteFileArgs](WriteFile, "Create or overwrite a file with the given content.",
		"write_file", "create_file", "write", "write_to_file"),
	tool[EditArgs](Edit, "Replace the one occurrence of old with new in a file (old must match exactly, whitespace included, and be unique).",
		"edit", "edit_file", "replace_in_file", "str_replace", "apply_edit"),
	tool[ListDirArgs](ListDir, "List a directory.",
		"list_dir", "list_directory", "list_files", "ls"),
	tool[SubmitArgs](Submit, "Submit your work when the fix is complete. Ends the episode.",
		"submit", "finish", "task_done", "attempt_completion", "done"),
}

// tool is one of rollcage's own tools, its schema derived from its
// argument type A.
func tool[A any](name, desc string, aliases ...string) Tool {
	s, err := jsonschema.For[A](nil)
	if err != nil {
		panic(fmt.Sprintf("toolcall: schema of %s: %v", name, err))
	}
	schema, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("toolcall: schema of %s: %v", name, err))
	}
	return Tool{Name: name, Description: desc, Schema: schema, Aliases: aliases}
}

// foreignTools are the tools of other harnesses' vocabularies the MCP
// endpoint offers besides rollcage's own, in their own argument shapes.
var foreignTools = []Tool{
	{Name: "execute_bash", Description: "OpenHands' name for bash: run a command in the persistent shell.",
		Schema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"},"is_input":{"type":"string"}},"required":["command"]}`)},
	{Name: "str_replace_editor", Description: "OpenHands' and SWE-agent's file editor: view, create, str_replace, insert.",
		Schema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","enum":["view","create","str_replace","insert","undo_edit"]},"path":{"type":"string"},"file_text":{"type":"string"},"old_str":{"type":"string"},"new_str":{"type":"string"},"insert_line":{"type":"integer"},"view_range":{"type":"array","items":{"type":"integer"}}},"required":["command","path"]}`)},
}

// Tools returns rollcage's own tools, in the order they are offered: the
// gateway's tool list, MCP's tools/list and the built-in loop all read
// them here.
func Tools() []Tool {
	out := make([]Tool, len(registry))
	for i, t := range registry {
		out[i] = t
		out[i].Aliases = append([]string(nil), t.Aliases...)
	}
	return out
}

// ForeignTools returns the tools of other vocabularies the MCP endpoint
// offers too (the monitor maps their calls onto rollcage's own).
func ForeignTools() []Tool { return append([]Tool(nil), foreignTools...) }

// ToolNames is the list of rollcage's tool names for messages: "bash,
// read_file, ..., submit".
func ToolNames() string {
	names := make([]string, len(registry))
	for i, t := range registry {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}
