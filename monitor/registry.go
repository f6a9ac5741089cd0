package monitor

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/toolcall"
)

// toolSpec is everything the monitor knows of one tool: how to run and
// fake it (package toolcall decodes its arguments, package normalize
// makes it legible to the rules). Every stage of a call looks it up here.
type toolSpec struct {
	toolcall.Tool
	// run executes the call in the sandbox.
	run func(ctx context.Context, e *EpisodeState, res *decision.CallResult, args any) error
	// dummy is what a blocked call shows; nil: the generic "not available".
	dummy func(args any, n toolcall.Normalized, d decision.Decision, f Facts) (string, int)
	// argsType is what toolcall decodes the arguments into: a pointer to
	// their type.
	argsType reflect.Type
}

// def is a toolSpec with typed arguments; spec erases the type and
// takes the tool's name, description, schema and aliases from toolcall.
type def[A any] struct {
	name  string
	run   func(ctx context.Context, e *EpisodeState, res *decision.CallResult, args *A) error
	dummy func(args *A, n toolcall.Normalized, d decision.Decision, f Facts) (string, int)
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
		run: func(ctx context.Context, e *EpisodeState, res *decision.CallResult, args any) error {
			return d.run(ctx, e, res, args.(*A))
		},
	}
	if d.dummy != nil {
		ts.dummy = func(args any, n toolcall.Normalized, dec decision.Decision, f Facts) (string, int) {
			return d.dummy(args.(*A), n, dec, f)
		}
	}
	return ts
}

// registry is the tool model, in the order tools are offered.
var registry = []*toolSpec{
	def[toolcall.BashArgs]{
		name: toolcall.Bash,
		run:  runBash, dummy: bashDummy,
	}.spec(),
	def[toolcall.ReadFileArgs]{
		name: toolcall.ReadFile,
		run:  runReadFile, dummy: func(_ *toolcall.ReadFileArgs, n toolcall.Normalized, _ decision.Decision, _ Facts) (string, int) {
			return notFoundDummy(n)
		},
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
	}.spec(),
	def[toolcall.EditArgs]{
		name: toolcall.Edit,
		run:  runEdit,
		dummy: func(_ *toolcall.EditArgs, n toolcall.Normalized, _ decision.Decision, _ Facts) (string, int) {
			return editedMsg(firstOr(n.Writes, n.Raw)), 0
		},
	}.spec(),
	def[toolcall.ListDirArgs]{
		name: toolcall.ListDir,
		run:  runListDir, dummy: func(_ *toolcall.ListDirArgs, n toolcall.Normalized, _ decision.Decision, _ Facts) (string, int) {
			return notFoundDummy(n)
		},
	}.spec(),
	def[toolcall.SubmitArgs]{
		name: toolcall.Submit,
		run: func(_ context.Context, _ *EpisodeState, res *decision.CallResult, _ *toolcall.SubmitArgs) error {
			res.Submit = true
			res.Output = "submitted"
			return nil
		},
	}.spec(),
}

// byName indexes the registry.
var byName = func() map[string]*toolSpec {
	n := map[string]*toolSpec{}
	for _, s := range registry {
		n[s.Name] = s
	}
	return n
}()

// decoded is a call's arguments as toolcall decoded them, once, with the
// tool they are for.
type decoded struct {
	spec *toolSpec // nil: a generic tool
	// args are the typed arguments, set when they were read: with err nil,
	// or err naming an unknown field (the call does not run, but the rules
	// see what it asked for).
	args any
	err  error // what is wrong with the arguments (strict decoding)
}

// decodedOf is p's arguments as decoded (by toolcall.Prepare or Check:
// not again here) with their tool's spec.
func decodedOf(p toolcall.Prepared) decoded {
	args, err := p.Args()
	return decoded{spec: byName[p.Call.Tool], args: args, err: err}
}
