package toolcall

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// Tool names of the typed tool-call model (the registry, Tools, says
// what each does). Any other name is a generic tool whose Args are passed
// to the rules as JSON.
const (
	Bash      = "bash"
	ReadFile  = "read_file"
	WriteFile = "write_file"
	Edit      = "edit" // str_replace-style: replace Old with New in Path
	ListDir   = "list_dir"
	Submit    = "submit"
)

// The argument types below are the tools' JSON schemas too (the
// registry derives them): a jsonschema tag is a field's description.

// BashArgs are the arguments of Bash.
type BashArgs struct {
	Command string `json:"command" jsonschema:"the command"`
	// TimeoutSec overrides the episode's per-call timeout when > 0.
	TimeoutSec float64 `json:"timeout_sec,omitempty" jsonschema:"optional timeout in seconds"`
}

// ReadFileArgs are the arguments of ReadFile.
type ReadFileArgs struct {
	Path string `json:"path" jsonschema:"absolute, or relative to the shell's directory"`
}

// WriteFileArgs are the arguments of WriteFile.
type WriteFileArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	// Encoding says how Content is given: "" (the text itself) or
	// EncodingBase64 (any bytes: a binary file).
	Encoding string `json:"encoding,omitempty" jsonschema:"optional: base64 when content is base64-encoded bytes (a binary file)"`
}

// EncodingBase64 is WriteFileArgs.Encoding for base64-encoded content.
const EncodingBase64 = "base64"

// Bytes are the bytes to write: Content, decoded by Encoding.
func (a WriteFileArgs) Bytes() ([]byte, error) {
	switch a.Encoding {
	case "":
		return []byte(a.Content), nil
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(a.Content)
		if err != nil {
			return nil, fmt.Errorf("content is not valid base64 (%v): encode the bytes with standard base64", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("encoding %q: use %q for base64 content, or omit it for text", a.Encoding, EncodingBase64)
}

// EditArgs are the arguments of Edit: replace the one occurrence of Old
// in Path with New.
type EditArgs struct {
	Path string `json:"path"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// ListDirArgs are the arguments of ListDir.
type ListDirArgs struct {
	Path string `json:"path" jsonschema:"absolute, or relative to the shell's directory"`
}

// SubmitArgs are the arguments of Submit.
type SubmitArgs struct {
	Message string `json:"message,omitempty" jsonschema:"optional note on what you changed"`
}

// Tool is one tool of rollcage's call model as a policy is offered it:
// the gateway's tool list, MCP's tools/list and the built-in loop all
// read it from the registry (Tools), so they cannot drift apart.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON schema of the arguments. For rollcage's own tools
	// it is derived from the argument type (BashArgs, ...): every field,
	// required unless omitempty, and no other (the monitor rejects unknown
	// fields, so additionalProperties is false).
	Schema json.RawMessage
	// Aliases are the lowercase names of other harnesses' tools that the
	// monitor maps onto this one (the name itself among them).
	Aliases []string
}

// ArgsError is a call refused before it runs because its arguments cannot
// be run as they are (the gateway answers it 400, or an MCP error result).
// Nothing is numbered or recorded for it.
type ArgsError struct {
	Field   string // "args", "args.command", ...
	Problem string // what is wrong and what to give instead
}

func (e *ArgsError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Problem) }
