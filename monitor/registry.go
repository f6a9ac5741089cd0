package monitor

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/toolcall"
)

// toolSpec is everything the monitor knows of one tool: how to decode,
// run and fake it (package normalize makes it legible to the rules).
// Every step of a call looks it up here.
type toolSpec struct {
	toolcall.Tool
	// decode reads the arguments strictly (toolcall.DecodeArgs: unknown
	// fields and trailing data are refused); read says the typed value
	// holds them even so.
	decode func(raw json.RawMessage) (args any, read bool, err error)
	// run executes the call in the sandbox.
	run func(ctx context.Context, e *EpisodeState, res *decision.CallResult, args any) error
	// dummy is what a blocked call shows; nil: the generic "not available".
	dummy func(args any, n toolcall.Normalized, d decision.Decision, f Facts) (string, int)
	// foreign builds the arguments from a foreign call's.
	foreign func(f foreignArgs) any
	// argsType is what decode returns: a pointer to the arguments' type.
	argsType reflect.Type
}

// def is a toolSpec with typed arguments; spec erases the type and
// takes the tool's name, description, schema and aliases from toolcall.
type def[A any] struct {
	name    string
	run     func(ctx context.Context, e *EpisodeState, res *decision.CallResult, args *A) error
	dummy   func(args *A, n toolcall.Normalized, d decision.Decision, f Facts) (string, int)
	foreign func(f foreignArgs) A
}

func (d def[A]) spec() *toolSpec {
	tools := toolcall.Tools()
	i := slices.IndexFunc(tools, func(t toolcall.Tool) bool { return t.Name == d.name })
	if i < 0 {
		panic(fmt.Sprintf("monitor: %s is not one of toolcall.Tools", d.name))
	}
	ts := &toolSpec{
		Tool:     tools[i],
		argsType: reflect.TypeFor[*A](),
		decode: func(raw json.RawMessage) (any, bool, error) {
			if testDecodeHook != nil {
				testDecodeHook(d.name)
			}
			a := new(A)
			read, err := toolcall.DecodeArgs(raw, a)
			return a, read, err
		},
		run: func(ctx context.Context, e *EpisodeState, res *decision.CallResult, args any) error {
			return d.run(ctx, e, res, args.(*A))
		},
	}
	if d.dummy != nil {
		ts.dummy = func(args any, n toolcall.Normalized, dec decision.Decision, f Facts) (string, int) {
			return d.dummy(args.(*A), n, dec, f)
		}
	}
	if d.foreign != nil {
		ts.foreign = func(f foreignArgs) any { a := d.foreign(f); return &a }
	}
	return ts
}

// registry is the tool model, in the order tools are offered.
var registry = []*toolSpec{
	def[toolcall.BashArgs]{
		name: toolcall.Bash,
		run:  runBash, dummy: bashDummy,
		foreign: func(f foreignArgs) toolcall.BashArgs {
			if !f.ok {
				return toolcall.BashArgs{Command: f.raw} // not JSON: the text is the command
			}
			return toolcall.BashArgs{Command: f.str("command", "cmd", "script", "input", "code")}
		},
	}.spec(),
	def[toolcall.ReadFileArgs]{
		name: toolcall.ReadFile,
		run:  runReadFile, dummy: func(_ *toolcall.ReadFileArgs, n toolcall.Normalized, _ decision.Decision, _ Facts) (string, int) {
			return notFoundDummy(n)
		},
		foreign: func(f foreignArgs) toolcall.ReadFileArgs { return toolcall.ReadFileArgs{Path: f.path()} },
	}.spec(),
	def[toolcall.WriteFileArgs]{
		name: toolcall.WriteFile,
		run:  runWriteFile,
		dummy: func(args *toolcall.WriteFileArgs, n toolcall.Normalized, _ decision.Decision, _ Facts) (string, int) {
			size := len(args.Content)
			if b, err := args.Bytes(); err == nil {
				size = len(b)
			}
			return wroteMsg(firstOr(n.Writes, args.Path), size), 0
		},
		foreign: func(f foreignArgs) toolcall.WriteFileArgs {
			return toolcall.WriteFileArgs{Path: f.path(), Content: f.str("content", "file_text", "contents", "text")}
		},
	}.spec(),
	def[toolcall.EditArgs]{
		name: toolcall.Edit,
		run:  runEdit,
		dummy: func(_ *toolcall.EditArgs, n toolcall.Normalized, _ decision.Decision, _ Facts) (string, int) {
			return editedMsg(firstOr(n.Writes, n.Raw)), 0
		},
		foreign: func(f foreignArgs) toolcall.EditArgs {
			return toolcall.EditArgs{Path: f.path(), Old: f.str("old", "old_str", "old_string", "search"), New: f.str("new", "new_str", "new_string", "replace")}
		},
	}.spec(),
	def[toolcall.ListDirArgs]{
		name: toolcall.ListDir,
		run:  runListDir, dummy: func(_ *toolcall.ListDirArgs, n toolcall.Normalized, _ decision.Decision, _ Facts) (string, int) {
			return notFoundDummy(n)
		},
		foreign: func(f foreignArgs) toolcall.ListDirArgs {
			return toolcall.ListDirArgs{Path: f.str("path", "dir", "directory")}
		},
	}.spec(),
	def[toolcall.SubmitArgs]{
		name: toolcall.Submit,
		run: func(_ context.Context, _ *EpisodeState, res *decision.CallResult, _ *toolcall.SubmitArgs) error {
			res.Submit = true
			res.Output = "submitted"
			return nil
		},
		foreign: func(f foreignArgs) toolcall.SubmitArgs {
			return toolcall.SubmitArgs{Message: f.str("message", "result", "summary")}
		},
	}.spec(),
}

// editorAliases are the str_replace_editor family (Anthropic's, OpenHands'
// and SWE-agent's), which FromForeign maps by sub-command (EditorCall).
var editorAliases = []string{"str_replace_editor", "str_replace_based_edit_tool", "text_editor", "edit_tool", "file_editor"}

// byName and byAlias index the registry.
var byName, byAlias = func() (map[string]*toolSpec, map[string]*toolSpec) {
	n, a := map[string]*toolSpec{}, map[string]*toolSpec{}
	for _, s := range registry {
		n[s.Name] = s
		for _, x := range s.Aliases {
			a[x] = s
		}
	}
	return n, a
}()

// testDecodeHook, when set by a test, runs at each decode of a call's
// arguments (the registry's and a foreign call's).
var testDecodeHook func(tool string)

// decoded is a call's arguments decoded once, by its tool.
type decoded struct {
	spec *toolSpec // nil: a generic tool
	// args are the typed arguments, set when they were read: with err nil,
	// or err naming an unknown field (the call does not run, but the rules
	// see what it asked for).
	args any
	err  error // what is wrong with the arguments (strict decoding)
}

// decodeCall decodes the call's arguments by its tool, strictly: the one
// decode of a call's arguments, whose result normalize, Check and execute
// all read.
func decodeCall(call toolcall.Call) decoded {
	s := byName[call.Tool]
	if s == nil {
		return decoded{}
	}
	args, read, err := s.decode(call.Args)
	if !read {
		args = nil
	}
	return decoded{spec: s, args: args, err: err}
}

// Prepared is a call with its arguments decoded by the tool registry
// (Prepare, or Check for a call from outside the built-in loop), ready
// for EpisodeState.Handle, which reads the typed arguments instead of
// decoding the JSON again.
type Prepared struct {
	Call toolcall.Call
	// Step is the call's step in the episode, numbered by the caller (the
	// harness): the monitor numbers no steps.
	Step int
	args decoded
}

// Prepare decodes the call's arguments by its tool.
func Prepare(call toolcall.Call) Prepared { return Prepared{Call: call, args: decodeCall(call)} }

// PrepareArgs is a call of tool with the arguments built for it (a
// toolcall.BashArgs for bash, and so on), encoded for the record and kept
// typed: NormalizePrepared and EpisodeState.Handle read them without
// decoding the JSON again. Arguments of another type than the tool's are
// decoded from their JSON, as Prepare does.
func PrepareArgs[A any](tool string, args A) Prepared {
	if s := byName[tool]; s != nil && s.argsType == reflect.TypeFor[*A]() {
		return typedCall(tool, &args)
	}
	b, _ := json.Marshal(args)
	return Prepare(toolcall.Call{Tool: tool, Args: b})
}
