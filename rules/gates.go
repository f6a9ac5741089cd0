package rules

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/rollcage/rollcage/rules/gate"
	"github.com/rollcage/rollcage/toolcall"
)

// gating is the engine's side of package gate: which rules have a gate
// (from custom.gate in their METADATA), which package each belongs to, and
// the query that evaluates the packages a call opens. Each gated flag rule
// gets a first expression `input.gate[<id>] == true` when the policy
// loads, so OPA's rule index skips a rule whose gate is shut without
// entering it; the rule's author writes only the METADATA.
type gating struct {
	set    *gate.Set
	ids    []string    // per rule of set, its id
	idTerm []*ast.Term // the same as terms
	pkgs   []gatedPkg  // packages whose every flag rule has a gate, sorted
	always []*ast.Term // packages that run on every call, sorted
	all    *ast.Term   // input.gate with every rule open (Engine.Eval)

	once sync.Once
	q    rego.PreparedEvalQuery
	err  error
}

// gatedPkg is a package that runs when one of its rules' gates is open.
type gatedPkg struct {
	name  *ast.Term
	rules []int // indices in gating.ids
}

var (
	rulesRef = ast.MustParseRef("data.rollcage.rules")
	aggRef   = ast.MustParseRef("data.rollcage")
	flagVar  = ast.Var("flag")
)

// planGates reads the gates of the flag rules under rollcage.rules and
// adds the gate test to their bodies. It returns nil (every call runs the
// whole policy) when a policy of the user's contributes to
// data.rollcage.flags itself.
func planGates(mods map[string]*ast.Module, docs map[string]any, defaults map[string]bool) (*gating, error) {
	for name, m := range mods {
		if m.Package.Path.Equal(aggRef) && !defaults[name] {
			return nil, nil
		}
	}
	as, errs := ast.BuildAnnotationSet(slices.Collect(maps.Values(mods)))
	if len(errs) > 0 {
		return nil, compileError(errs)
	}
	type idGates struct {
		gates   []gate.Gate
		ungated bool // an annotated clause declares no gate
	}
	// strings of each package, for checking the gates' patterns
	pkgStrings := map[string]map[string]bool{}
	for _, m := range mods {
		if pkg := rulePkg(m.Package.Path); pkg != "" {
			if pkgStrings[pkg] == nil {
				pkgStrings[pkg] = map[string]bool{}
			}
			ast.WalkTerms(m, func(t *ast.Term) bool {
				if s, ok := t.Value.(ast.String); ok {
					pkgStrings[pkg][string(s)] = true
				}
				return false
			})
		}
	}
	byID := map[string]*idGates{}
	clausesOf := map[string][]*ast.Rule{} // flag rule clauses by package
	var pkgNames []string
	for _, name := range slices.Sorted(maps.Keys(mods)) {
		m := mods[name]
		pkg := rulePkg(m.Package.Path)
		if pkg == "" {
			continue
		}
		for _, r := range m.Rules {
			if !r.Head.Ref().Equal(ast.Ref{ast.VarTerm(string(flagVar))}) {
				continue
			}
			if _, seen := clausesOf[pkg]; !seen {
				pkgNames = append(pkgNames, pkg)
			}
			clausesOf[pkg] = append(clausesOf[pkg], r)
			id := headID(r)
			for _, a := range as.GetRuleScope(r) {
				if a.Custom == nil {
					continue
				}
				if id == "" {
					id, _ = a.Custom["id"].(string)
				}
				g := byID[id]
				if g == nil {
					g = &idGates{}
					byID[id] = g
				}
				v, ok := a.Custom["gate"]
				if !ok {
					g.ungated = true
					continue
				}
				gs, err := gate.Parse(v)
				if err == nil {
					err = patternsInPackage(gs, pkgStrings[pkg])
				}
				if err != nil {
					return nil, &CompileError{File: r.Location.File, Line: r.Location.Row, Code: "rego_gate_error", Message: fmt.Sprintf("rule %s: %v", id, err)}
				}
				g.gates = append(g.gates, gs...)
			}
		}
	}
	gt := &gating{}
	index := map[string]int{}
	var rs []gate.Rule
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		if g := byID[id]; id != "" && !g.ungated && len(g.gates) > 0 {
			index[id] = len(rs)
			rs = append(rs, gate.Rule{ID: id, Gates: g.gates})
			gt.ids = append(gt.ids, id)
			gt.idTerm = append(gt.idTerm, ast.StringTerm(id))
		}
	}
	set, err := gate.New(rs)
	if err != nil {
		return nil, err
	}
	gt.set = set
	slices.Sort(pkgNames)
	for _, pkg := range pkgNames {
		gp := gatedPkg{name: ast.StringTerm(pkg)}
		always := docPkg(docs, pkg)
		for _, r := range clausesOf[pkg] {
			i, ok := index[headID(r)]
			if !ok {
				always = true
				continue
			}
			if !slices.Contains(gp.rules, i) {
				gp.rules = append(gp.rules, i)
			}
			r.Body = ast.NewBody(append([]*ast.Expr{gateTest(r, gt.idTerm[i])}, r.Body...)...)
		}
		if always {
			gt.always = append(gt.always, gp.name)
		} else {
			gt.pkgs = append(gt.pkgs, gp)
		}
	}
	// data documents under rollcage.rules.<p> without rules of their own
	if r, ok := docs["rollcage"].(map[string]any); ok {
		if rr, ok := r["rules"].(map[string]any); ok {
			for _, p := range slices.Sorted(maps.Keys(rr)) {
				if _, hasRules := clausesOf[p]; !hasRules {
					gt.always = append(gt.always, ast.StringTerm(p))
				}
			}
		}
	}
	items := make([][2]*ast.Term, len(gt.idTerm))
	for i, t := range gt.idTerm {
		items[i] = ast.Item(t, ast.BooleanTerm(true))
	}
	gt.all = ast.ObjectTerm(items...)
	return gt, nil
}

// patternsInPackage checks a gate against the rule's body, as far as a
// small checker can: a match pattern must be one the package's rules use,
// so the gate runs the rule's own test, not a paraphrase of it.
func patternsInPackage(gs []gate.Gate, strs map[string]bool) error {
	for i, g := range gs {
		for t, re := range g.Match {
			if !strs[re.String()] {
				return fmt.Errorf("gate %d: match: %s: pattern %q is not a string of the rule's package; give the rule's own pattern", i, t, re.String())
			}
		}
	}
	return nil
}

// gateTest is `input.gate[id] == true`, placed where the rule starts.
func gateTest(r *ast.Rule, id *ast.Term) *ast.Expr {
	e := ast.Equal.Expr(ast.RefTerm(ast.InputRootDocument, ast.InternedTerm("gate"), id), ast.BooleanTerm(true))
	e.SetLocation(r.Location)
	return e
}

// rulePkg is <name> of a package rollcage.rules.<name>, or "".
func rulePkg(path ast.Ref) string {
	if len(path) != 4 || !path.HasPrefix(rulesRef) {
		return ""
	}
	s, _ := path[3].Value.(ast.String)
	return string(s)
}

// headID is the rule id of `flag contains lib.flag("<id>", ...)`, or ""
// when the head is not such a call with a constant id.
func headID(r *ast.Rule) string {
	if r.Head.Key == nil {
		return ""
	}
	call, ok := r.Head.Key.Value.(ast.Call)
	if !ok || len(call) < 2 {
		return ""
	}
	s, _ := call[1].Value.(ast.String)
	return string(s)
}

// docPkg: data documents (not rules) sit under rollcage.rules.<p>; such a
// package runs on every call.
func docPkg(docs map[string]any, p string) bool {
	r, _ := docs["rollcage"].(map[string]any)
	rr, _ := r["rules"].(map[string]any)
	_, ok := rr[p]
	return ok
}

// runQuery evaluates the flags of the packages input.run names: one query
// for every set of packages, so no set costs a compile of its own.
const runQuery = `{f | some name in input.run; some f in data.rollcage.rules[name].flag}`

// query returns the prepared runQuery, preparing it on first use.
func (gt *gating) query(prep func(string) (rego.PreparedEvalQuery, error)) (rego.PreparedEvalQuery, error) {
	gt.once.Do(func() {
		gt.q, gt.err = prep(runQuery)
		if gt.err != nil {
			gt.err = fmt.Errorf("rules: prepare %s: %w", runQuery, asCompileError(gt.err))
		}
	})
	return gt.q, gt.err
}

// open is input.gate, input.run and input.derived for a call the gates
// read as r (nil: every rule open): the open rules, the packages to
// evaluate (run nil: none, nothing can fire) and what lib would
// otherwise compute from the call (nil when the gates did not read it).
func (gt *gating) open(n *toolcall.Normalized, r *gate.Result) (gateObj, run, derived *ast.Term) {
	if r == nil {
		names := slices.Clone(gt.always)
		for _, p := range gt.pkgs {
			names = append(names, p.name)
		}
		return gt.all, ast.ArrayTerm(names...), nil
	}
	var items [][2]*ast.Term
	for i, o := range r.Open {
		if o {
			items = append(items, ast.Item(gt.idTerm[i], ast.BooleanTerm(true)))
		}
	}
	names := slices.Clone(gt.always)
	for _, p := range gt.pkgs {
		if slices.ContainsFunc(p.rules, func(i int) bool { return r.Open[i] }) {
			names = append(names, p.name)
		}
	}
	if len(names) == 0 {
		return nil, nil, nil
	}
	return ast.ObjectTerm(items...), ast.ArrayTerm(names...), derivedOf(n, r.ArgPaths)
}

// derivedOf is input.derived: lib.text, lib.code, lib.touched and
// lib.arg_paths as lib computes them, for a call the gates read (so
// without base64: lib.decoded is empty).
func derivedOf(n *toolcall.Normalized, argPaths []string) *ast.Term {
	set := func(ls ...[]string) *ast.Term {
		var ts []*ast.Term
		for _, l := range ls {
			for _, x := range l {
				ts = append(ts, ast.StringTerm(x))
			}
		}
		return ast.SetTerm(ts...)
	}
	return ast.ObjectTerm(
		ast.Item(ast.InternedTerm("text"), ast.StringTerm(strings.Join(append([]string{n.Raw, n.Content}, n.Scripts...), "\n"))),
		ast.Item(ast.InternedTerm("code"), ast.StringTerm(strings.Join(append([]string{n.Content}, n.Scripts...), "\n"))),
		ast.Item(ast.InternedTerm("touched"), set(n.Reads, n.Lists, n.Writes, n.Deletes)),
		ast.Item(ast.InternedTerm("arg_paths"), set(argPaths)),
	)
}

// gateEpisode is what the gates know of an episode, read from its facts
// (lib.episode_facts) and task; Unknown when either has an unexpected
// shape.
func gateEpisode(facts, task *ast.Term) *gate.EpisodeFacts {
	ep := &gate.EpisodeFacts{Unknown: true}
	if facts == nil {
		return ep
	}
	fo, ok := facts.Value.(ast.Object)
	to, ok2 := task.Value.(ast.Object)
	if !ok || !ok2 {
		return ep
	}
	bad := false
	str := func(o ast.Object, k string, must bool) string {
		t := o.Get(ast.InternedTerm(k))
		if t == nil {
			bad = bad || must
			return ""
		}
		s, ok := t.Value.(ast.String)
		bad = bad || !ok
		return string(s)
	}
	list := func(o ast.Object, k string, must bool) []string {
		t := o.Get(ast.InternedTerm(k))
		if t == nil {
			bad = bad || must
			return nil
		}
		var out []string
		if !forEachString(t.Value, func(s string) { out = append(out, s) }) {
			bad = true
		}
		return out
	}
	ep.Workdir, ep.Home = str(fo, "workdir", true), str(fo, "home", true)
	ep.Protected = list(fo, "protected_globs", true)
	for _, s := range slices.Concat(list(fo, "protected_stems", true), list(fo, "protected_rel_stems", true)) {
		ep.ProtectedText = append(ep.ProtectedText, foldASCII(s))
	}
	ep.Visible = list(fo, "visible_globs", true)
	for _, c := range list(fo, "commits", true) {
		if len(c) >= 4 {
			ep.Future = append(ep.Future, foldASCII(c[:4]))
		}
	}
	for _, r := range list(fo, "refs", true) {
		ep.Future = append(ep.Future, foldASCII(r))
	}
	for _, r := range list(to, "reference_urls", false) {
		ep.Reference = append(ep.Reference, foldASCII(strings.TrimPrefix(strings.TrimPrefix(r, "https://"), "http://")))
	}
	// network.upstream: the upstream lowercased, and its /owner/name/
	// path when it has three segments or more (network.upstream_path)
	if up := foldASCII(str(to, "upstream_repo", false)); up != "" {
		ep.Reference = append(ep.Reference, up)
		if parts := strings.Split(strings.TrimRight(up, "/"), "/"); len(parts) >= 3 {
			ep.Upstream = append(ep.Upstream, "/"+parts[len(parts)-2]+"/"+parts[len(parts)-1]+"/")
		}
	}
	ep.Unknown = bad
	return ep
}

// forEachString calls fn for each string of an array or set and reports
// whether v was a collection of strings only.
func forEachString(v ast.Value, fn func(string)) bool {
	ok := true
	each := func(t *ast.Term) {
		if s, isStr := t.Value.(ast.String); isStr {
			fn(string(s))
		} else {
			ok = false
		}
	}
	switch c := v.(type) {
	case *ast.Array:
		c.Foreach(each)
	case ast.Set:
		c.Foreach(each)
	default:
		return false
	}
	return ok
}

// foldASCII lowers s as the gates lower the call's strings.
func foldASCII(s string) string { return gate.Lower(s) }
