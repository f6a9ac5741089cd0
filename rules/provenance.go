package rules

import (
	"github.com/open-policy-agent/opa/v1/ast"
)

// Provenance is what the rules know of where the episode's files came
// from: input.provenance. Rules use it to tell work on the agent's own
// files (a reproduction script it wrote and then deleted, a scratch test
// with a skip) from changes to the repository's.
//
// Offline, the audit fills it from the trajectory; online, whoever watches
// the sandbox's files (the agent's file watch) fills it from the effects
// it saw. Both call EpisodeEval.SetProvenance before evaluating a call.
type Provenance struct {
	// Created maps an absolute path to the step at which the agent created
	// that file in this episode, numbered as the monitor and the
	// trajectory's events number calls (the first call is step 1); a file that
	// existed at the start is never in it. A call that creates a file may
	// already list it, so that `cat > repro.py … && rm repro.py` is work
	// on the agent's own file.
	Created map[string]int `json:"created"`
	// Missing maps an absolute path to the step at which it was shown not
	// to exist when that call ran (offline: the call's own output said so,
	// "rm: cannot remove 'x': No such file or directory"); removing it
	// removes nothing.
	Missing map[string]int `json:"missing,omitempty"`
}

// value is input.provenance as an AST term.
func (p Provenance) value() *ast.Term {
	return ast.ObjectTerm(ast.Item(ast.StringTerm("created"), steps(p.Created)), ast.Item(ast.StringTerm("missing"), steps(p.Missing)))
}

func steps(m map[string]int) *ast.Term {
	items := make([][2]*ast.Term, 0, len(m))
	for path, step := range m {
		items = append(items, [2]*ast.Term{ast.StringTerm(path), ast.IntNumberTerm(step)})
	}
	return ast.NewTerm(ast.NewObject(items...))
}

// SetProvenance replaces the provenance the rules see on later calls.
// The map is converted at once; the caller may reuse it.
func (ep *EpisodeEval) SetProvenance(p Provenance) {
	ep.prov = p.value()
}
