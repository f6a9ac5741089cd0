package rules

import (
	"maps"
	"math/bits"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Gates derived from the policy. At load time every flag rule's body is
// read for what it requires of the call's text — the literals its regular
// expressions require (the way code search computes required trigrams
// with regexp/syntax), the strings its contains, startswith, endswith, ==
// and `in {...}` tests compare call fields with — and the rule gets a gate:
// a conjunction of clauses, each a set of lowercase literals one of which
// the call's haystack must contain (the haystack is every string of the
// normalized call, lowercased; see gates.scan). A rule package whose every
// flag rule has such a gate is evaluated only for calls that pass one of
// them, so a user's rule is gated with no Go change.
//
// The reading is sound or silent: it follows values from input.normalized
// and input.derived through variables, iteration, rule and function
// references and a few string builtins (lower, upper, trim*, substring,
// split, concat, regex.find_n); anything else (input.task, input.history,
// data, numbers, sprintf, base64, a `with`, a negation) is unknown, and a
// test of an unknown value requires nothing. A rule whose body yields no
// clause has no gate: its package runs on every call. A joined string (lib
// text is raw, content and scripts joined with "\n") contains a literal
// that spans the join only in pieces, so literals are cut at the
// separators a value may hold and the longest piece is required.
// TestPrefilterEquivalence and FuzzPrefilterEquivalence (monitor) hold the
// gated result equal to evaluating every rule, for the default bundle and
// a user policy.
//
// Literals alone leave open most gates of rules that search code for a
// phrase ("for the hidden tests" requires "for", "the" and "test", which
// most code holds), and such a rule's package then runs only for its
// pattern to find nothing. So a pattern searching a text Go has exactly
// (lib.code, lib.text, input.normalized.raw) is a clause too, which the
// scan decides by running the pattern in Go once the gate's literal
// clauses hold (gateSet.resolve).

// clause is satisfied when the haystack contains one of its literals. A
// regexp clause's literal (regexLit) is satisfied instead when its
// pattern matches its call text.
type clause []string

// kind is the shape of one alternative of an abstract value.
type kind int

const (
	kUnknown kind = iota // anything
	kStr                 // a string of call strings (each in the haystack) and separator bytes seps
	kConst               // the constant string lit
	kColl                // an array or set whose elements are elem
	kObj                 // an object: fields by key, other for the rest
)

// alt is one alternative of an abstract value; guard is what the call
// must satisfy for the alternative to exist at all.
type alt struct {
	kind   kind
	seps   string
	lit    string
	elem   val
	fields map[string]val
	other  val
	keys   val
	keyed  bool // an object whose keys are in the haystack: a field exists only when its key is there
	guard  []clause
	doc    *docReads // the episode's facts or task document itself: reading it is noted
	// text names the call text this alternative is exactly, as gates.scan
	// has it (scan.callText): a regexp searching it can be run in Go
	// (regexLit)
	text string
}

// docReads notes which fields of an episode document (facts, task) the
// deriver reads, into its current read set.
type docReads struct {
	d    *deriver
	name string
}

// note records that field k ("*": every field) was read.
func (r *docReads) note(k string) {
	if r != nil && r.d.reads != nil {
		r.d.reads[r.name+"\x00"+k] = true
	}
}

// val is a value as the deriver knows it: one of its alternatives. No
// alternative at all is a value that never exists (an empty constant
// collection's element, say).
type val []*alt

var unknown = val{{kind: kUnknown}}

func callStr(seps string) val { return val{{kind: kStr, seps: seps}} }

func collOf(elem val) val { return val{{kind: kColl, elem: elem}} }

// guarded is v with g added to each alternative's guard.
func guarded(v val, g []clause) val {
	g = slices.DeleteFunc(slices.Clone(g), func(c clause) bool { return len(c) == 0 || slices.Contains(c, "") })
	if len(g) == 0 {
		return v
	}
	out := make(val, len(v))
	for i, a := range v {
		c := *a
		c.guard = append(slices.Clip(a.guard), g...)
		out[i] = &c
	}
	return out
}

// inputVal is what the deriver knows of input: the normalized call's
// strings are in the haystack, and input.derived (which Episode.Eval
// passes whenever it gates) holds call strings joined by newlines. An
// element of a list of the call exists only when the list is not empty,
// which gates.scan marks in the haystack (marker).
func inputVal(facts, task *ast.Term, memo bool) val {
	s := callStr("")
	list := func(name string) val { return collOf(guarded(s, []clause{{marker(name)}})) }
	obj := func(f map[string]val) val { return val{{kind: kObj, fields: f, other: unknown, keys: unknown}} }
	cmd := obj(map[string]val{"name": s, "argv": collOf(s)})
	git := obj(map[string]val{"sub": s, "args": collOf(s), "flags": collOf(s), "refs": collOf(s)})
	norm := map[string]val{
		"raw": exactly(s, callTextRaw), "content": s, "old_content": s, "cwd": s,
		"commands": collOf(guarded(cmd, []clause{{marker("commands")}})),
		"git":      collOf(guarded(git, []clause{{marker("git")}})),
		"env":      {{kind: kObj, fields: map[string]val{}, other: guarded(s, []clause{{marker("env")}}), keys: guarded(s, []clause{{marker("env")}}), keyed: true}},
	}
	for _, k := range listFields {
		norm[k] = list(k)
	}
	// lib.code is "" when the call carries no code (content, scripts)
	// and call strings only when it does (the marker "code")
	code := append(constVal(""), guarded(callStr("\n"), []clause{{marker("code")}})...)
	derived := map[string]val{"text": exactly(callStr("\n"), callTextAll), "code": exactly(code, callTextCode), "touched": list("touched"), "arg_paths": list("arg_paths")}
	in := map[string]val{"normalized": obj(norm), "derived": obj(derived)}
	if memo {
		// input.memo (Episode.buildMemo): what it holds is not the call's,
		// but a list or rule list there is not empty only when its marker
		// is in the haystack (memoMarkers)
		mf := map[string]val{}
		for _, k := range memoLists {
			mf[k] = collOf(guarded(unknown, []clause{{marker("memo." + k)}}))
		}
		for _, k := range memoRuleLists {
			mf[k] = append(constVal(""), guarded(unknown, []clause{{marker("memo." + k)}})...)
		}
		in["memo"] = obj(mf)
	}
	if facts != nil {
		in["facts"] = astVal(facts.Value)
	}
	if task != nil {
		in["task"] = astVal(task.Value)
	}
	return obj(in)
}

// trackDocs makes the deriver note which fields of the episode's facts
// and task it reads (when they are objects).
func (d *deriver) trackDocs() {
	for _, name := range []string{"facts", "task"} {
		v := d.input[0].fields[name]
		if len(v) == 1 && v[0].kind == kObj {
			c := *v[0]
			c.doc = &docReads{d: d, name: name}
			d.input[0].fields[name] = val{&c}
		}
	}
}

// astVal is a document of the episode (its facts, its task) as the
// deriver knows it: its strings are constants, so a test of the call
// against them yields the episode's own literals.
func astVal(v ast.Value) val {
	switch x := v.(type) {
	case ast.String:
		return constVal(string(x))
	case *ast.Array:
		var elem val
		for i := range x.Len() {
			elem = append(elem, astVal(x.Elem(i).Value)...)
		}
		return collOf(elem)
	case ast.Set:
		var elem val
		x.Foreach(func(t *ast.Term) { elem = append(elem, astVal(t.Value)...) })
		return collOf(elem)
	case ast.Object:
		o := &alt{kind: kObj, fields: map[string]val{}}
		x.Foreach(func(k, t *ast.Term) {
			ks, ok := k.Value.(ast.String)
			if !ok {
				o.other = append(o.other, unknown...)
				o.keys = append(o.keys, unknown...)
				return
			}
			o.keys = append(o.keys, constVal(string(ks))...)
			o.fields[string(ks)] = astVal(t.Value)
		})
		return val{o}
	}
	return unknown
}

// memoLists and memoRuleLists are the fields of input.memo: sets of
// flags, and their rule ids joined ("" when none).
var (
	memoLists     = []string{"discoveries", "reusable"}
	memoRuleLists = []string{"discovery_rules", "history_rules", "certain_rules"}
)

// memoRef is the rule whose value tells the engine which flags to keep in
// input.memo (discoveryCats); the memo is passed when it evaluates.
var memoRef = ast.MustParseRef("data.rollcage.rules.chained_discovery.discovery_cats")

// hasMemo: the policy defines memoRef, so Episodes pass input.memo.
func hasMemo(c *ast.Compiler) bool { return len(c.GetRulesExact(memoRef)) > 0 }

// listFields are the lists of the normalized call whose elements are call
// strings.
var listFields = []string{"scripts", "reads", "lists", "writes", "deletes", "packages", "hosts", "urls"}

// marker is the haystack line gates.scan adds when the call's list name is
// not empty: the literal a gate requires for an element of it to exist.
// Marker lines start with \x01, which a call's text only holds by chance
// (a gate then opens for nothing, which is sound).
func marker(name string) string { return "\x01" + name }

// deriver reads rule bodies; it memoizes rule values by reference.
type deriver struct {
	c     *ast.Compiler
	input val
	// present are the input documents every gated evaluation passes
	// (derived; facts and task when the deriver knows them): a rule
	// reading one of them never falls back to its default or else
	present map[string]bool
	vals    map[string]val
	busy    map[string]bool
	depth   int
	// episodic: what is being read has read the episode's facts or task
	// (or whether they are passed); valEpisodic, per memoized rule value,
	// whether it did. A gate that never did is the same for every
	// episode, so only the others are derived again per episode.
	episodic    bool
	valEpisodic map[string]bool
	base        map[string]val // rule values known beforehand, none episodic
	// reads: when not nil, the fields of facts and task (docReads.note)
	// what is being read has read; valReads, per memoized rule value
	reads    map[string]bool
	valReads map[string]map[string]bool
}

func newDeriver(c *ast.Compiler, facts, task *ast.Term) *deriver {
	memo := hasMemo(c)
	d := &deriver{c: c, input: inputVal(facts, task, memo), vals: map[string]val{}, busy: map[string]bool{},
		present: map[string]bool{"derived": true, "memo": memo}, valEpisodic: map[string]bool{}}
	d.present["facts"] = facts != nil
	d.present["task"] = task != nil
	return d
}

// maxDepth bounds how deep rule and function references are followed.
const maxDepth = 8

// ruleGate is the gate of one flag rule: nil when nothing is required.
func (d *deriver) ruleGate(r *ast.Rule) []clause {
	if r.Else != nil || r.Default {
		return nil
	}
	env := map[ast.Var]val{}
	cs := d.body(r.Body, env)
	return bestClauses(cs)
}

// bestClauses drops the clauses implied by others' literals only loosely:
// it keeps them all but removes duplicates; the gate is their conjunction.
func bestClauses(cs []clause) []clause {
	var out []clause
	seen := map[string]bool{}
	for _, c := range cs {
		c = slices.Compact(slices.Sorted(slices.Values(c))) // a copy: clauses share their arrays
		k := strings.Join(c, "\x00")
		if len(c) == 0 || c[0] == "" || seen[k] {
			continue // an empty literal is in every haystack: the clause requires nothing
		}
		seen[k] = true
		out = append(out, c)
	}
	return out
}

// body reads the expressions of a body in order, binding variables in env,
// and returns the clauses they require.
func (d *deriver) body(b ast.Body, env map[ast.Var]val) []clause {
	var cs []clause
	for _, e := range b {
		d.expr(e, env, &cs)
	}
	return cs
}

func (d *deriver) expr(e *ast.Expr, env map[ast.Var]val, cs *[]clause) {
	if e.Negated || len(e.With) > 0 || !e.IsCall() {
		return // a negation binds nothing and requires nothing; `with` changes input
	}
	ops := e.Operands()
	name := e.Operator().String()
	switch name {
	case "eq", "assign", "equal":
		if len(ops) != 2 {
			return
		}
		va, fa := d.term(ops[0], env, cs)
		vb, fb := d.term(ops[1], env, cs)
		switch {
		case fa && !fb && name != "equal":
			env[ops[0].Value.(ast.Var)] = vb
			requireExists(vb, cs)
		case fb && !fa && name != "equal":
			env[ops[1].Value.(ast.Var)] = va
			requireExists(va, cs)
		case !fa && !fb:
			if c, ok := equalClause(va, vb); ok {
				*cs = append(*cs, c)
			}
		}
		return
	case "neq":
		// x != c: x is none of its alternatives that are the constant c
		if len(ops) != 2 {
			return
		}
		va, _ := d.term(ops[0], env, cs)
		vb, _ := d.term(ops[1], env, cs)
		for _, side := range []struct {
			t *ast.Term
			v val
			c val
		}{{ops[0], va, vb}, {ops[1], vb, va}} {
			lit, ok := constString(side.c)
			if !ok {
				continue
			}
			rest := slices.DeleteFunc(slices.Clone(side.v), func(a *alt) bool { return a.kind == kConst && a.lit == lit && len(a.guard) == 0 })
			if v, isVar := side.t.Value.(ast.Var); isVar {
				env[v] = rest
			}
			requireExists(rest, cs)
			return
		}
		return
	case "internal.member_2":
		if len(ops) != 2 {
			return
		}
		vx, fx := d.term(ops[0], env, cs)
		vc, _ := d.term(ops[1], env, cs)
		if fx {
			env[ops[0].Value.(ast.Var)] = d.elems(vc, cs)
			return
		}
		if lits, ok := constStrings(vc); ok {
			if c, ok := testClause(vx, lits, false); ok {
				*cs = append(*cs, c)
			}
			return
		}
		if lit, ok := constString(vx); ok {
			if c, ok := testClause(d.elems(vc, cs), []string{lit}, false); ok {
				*cs = append(*cs, c)
			}
		}
		return
	case "internal.member_3":
		if len(ops) != 3 {
			return
		}
		vc, _ := d.term(ops[2], env, cs)
		var keys val
		elems := d.elemsWithKey(vc, cs, func(k val) { keys = k })
		if v, ok := ops[1].Value.(ast.Var); ok {
			if _, bound := env[v]; !bound {
				env[v] = elems
			}
		}
		if v, ok := ops[0].Value.(ast.Var); ok {
			if _, bound := env[v]; !bound {
				env[v] = orUnknown(keys)
			}
		}
		return
	}
	args := make([]val, len(ops))
	fresh := make([]bool, len(ops))
	for i, o := range ops {
		args[i], fresh[i] = d.term(o, env, cs)
	}
	bind := func(i int, v val) {
		if i < len(ops) && fresh[i] {
			env[ops[i].Value.(ast.Var)] = v
		}
	}
	defer func() { // whatever a call outputs that is not read below is unknown
		for i := range ops {
			if fresh[i] {
				if _, ok := env[ops[i].Value.(ast.Var)]; !ok {
					env[ops[i].Value.(ast.Var)] = unknown
				}
			}
		}
	}()
	if len(ops) >= 2 && !fresh[0] {
		if out, ok := foldConst(name, args[:len(ops)-1]); ok && fresh[len(ops)-1] {
			bind(len(ops)-1, out)
			return
		}
	}
	switch name {
	case "contains", "startswith", "endswith":
		if len(ops) == 2 {
			if lits, ok := constAlts(args[1]); ok {
				if len(lits) == 0 {
					*cs = append(*cs, clause{never}) // a needle that never exists
				} else if c, ok := testClause(args[0], lits, false); ok {
					*cs = append(*cs, c)
					requireMatched(args[0], cs)
				}
			}
		}
		return
	case "glob.match":
		if len(ops) == 3 {
			if globs, ok := constAlts(args[0]); ok {
				if c, ok := globClause(globs, args[2]); ok {
					*cs = append(*cs, c)
				}
			}
		}
		return
	case "regex.match", "regex.find_n", "regex.find_all_string_submatch_n":
		if len(ops) < 2 {
			return
		}
		pat, ok := constString(args[0])
		if !ok {
			return
		}
		rc := regexClauses(pat, args[1])
		if len(rc) > 0 {
			requireMatched(args[1], &rc)
		}
		if l, ok := regexLit(pat, args[1]); ok {
			rc = append(rc, clause{l})
		}
		if name == "regex.match" {
			*cs = append(*cs, rc...)
			return
		}
		if len(ops) == 4 { // find_n(pat, s, n, out): a match is a part of s
			elem := substrings(args[1])
			if name == "regex.find_all_string_submatch_n" {
				elem = collOf(elem)
			}
			bind(3, collOf(guarded(elem, rc)))
		}
		return
	case "lower", "upper", "trim_space":
		if len(ops) == 2 {
			bind(1, substrings(args[0]))
		}
		return
	case "trim", "trim_left", "trim_right", "trim_prefix", "trim_suffix":
		if len(ops) == 3 {
			bind(2, substrings(args[0]))
		}
		return
	case "substring":
		if len(ops) == 4 {
			bind(3, substrings(args[0]))
		}
		return
	case "split":
		if len(ops) == 3 {
			var out val
			for _, a := range args[0] {
				if c, ok := foldConst(name, []val{{a}, args[1]}); ok {
					out = append(out, c...)
				} else {
					out = append(out, collOf(substrings(val{a}))...)
				}
			}
			bind(2, out)
		}
		return
	case "concat":
		if len(ops) == 3 {
			if sep, ok := constString(args[0]); ok {
				if parts, ok := d.constArray(ops[1], env, cs); ok {
					bind(2, constVal(strings.Join(parts, sep)))
					return
				}
				bind(2, joined(members(args[1]), sep))
			}
		}
		return
	case "array.concat", "or", "union":
		// elements of either side; the result exists whether or not
		// either has elements
		if len(ops) == 3 {
			bind(2, collOf(append(slices.Clip(members(args[0])), members(args[1])...)))
		}
		return
	case "and":
		if len(ops) == 3 { // an element of both: one of the first's
			bind(2, collOf(members(args[0])))
		}
		return
	case "object.get":
		if len(ops) == 4 {
			if k, ok := constString(args[1]); ok {
				var out val
				for _, a := range args[0] {
					a.doc.note(k)
					if _, has := a.fields[k]; a.kind == kObj && a.other == nil && !a.keyed {
						if has { // a closed object (a document of the episode): its field or the default
							out = append(out, field(val{a}, k)...)
						} else {
							out = append(out, guarded(args[2], a.guard)...)
						}
						continue
					}
					out = append(out, field(val{a}, k)...)
					out = append(out, guarded(args[2], a.guard)...)
				}
				bind(3, out)
			}
		}
		return
	case "regex.replace":
		// a pattern every match of which ends the text removes a suffix:
		// the result is a prefix of s followed by copies of the
		// replacement, a join of call strings with its bytes
		if len(ops) == 4 {
			pat, ok1 := constString(args[1])
			repl, ok2 := constString(args[2])
			if ok1 && ok2 && suffixOnly(pat) {
				bind(3, joinedWith(substrings(args[0]), repl))
			}
		}
		return
	}

	// a function of the policy: what every definition requires of its
	// arguments, one clause per definition joined
	ref := e.Operator()
	if !ref.HasPrefix(ast.DefaultRootRef) {
		return
	}
	defs := d.c.GetRulesExact(ref)
	if len(defs) == 0 || len(defs[0].Head.Args) == 0 {
		return
	}
	nargs := len(defs[0].Head.Args)
	out, c, ok := d.function(ref.String(), defs, args[:min(nargs, len(args))])
	if ok {
		*cs = append(*cs, c)
	}
	if len(ops) > nargs {
		bind(nargs, out)
	}
}

// function reads a function's definitions with the arguments given: its
// value, and a clause one of whose literals each definition requires.
func (d *deriver) function(key string, defs []*ast.Rule, args []val) (val, clause, bool) {
	if d.depth >= maxDepth || d.busy[key] {
		return unknown, nil, false
	}
	d.busy[key] = true
	d.depth++
	defer func() { delete(d.busy, key); d.depth-- }()
	var (
		out    val
		joined clause
		all    = true
	)
	for _, r := range defs {
		for ; r != nil; r = r.Else {
			if r.Default {
				all = false
				out = append(out, unknown...)
				continue
			}
			env := map[ast.Var]val{}
			var cs []clause
			for i, p := range r.Head.Args {
				if i >= len(args) {
					break
				}
				switch pv := p.Value.(type) {
				case ast.Var:
					if !pv.IsWildcard() {
						env[pv] = args[i]
					}
				case ast.String:
					if c, ok := testClause(args[i], []string{string(pv)}, false); ok {
						cs = append(cs, c)
					}
				}
			}
			cs = append(cs, d.body(r.Body, env)...)
			if v := r.Head.Value; v != nil {
				tv, fresh := d.term(v, env, &cs)
				if fresh {
					tv = unknown
				}
				out = append(out, tv...)
			}
			if len(cs) == 0 {
				all = false
			} else if all {
				joined = append(joined, best(cs)...)
			}
		}
	}
	if !all {
		return out, nil, false
	}
	return out, joined, true
}

// best is the clause of a conjunction worth testing alone: the one whose
// shortest literal is longest.
func best(cs []clause) clause {
	var b clause
	score := -1
	for _, c := range cs {
		s := len(c[0])
		for _, l := range c {
			s = min(s, len(l))
			if strings.HasPrefix(l, "\x01") {
				s = 0 // a list's marker says less than a literal of its text
			}
		}
		if s > score || s == score && len(c) < len(b) {
			b, score = c, s
		}
	}
	return b
}

// term evaluates a term; fresh reports a variable not bound yet.
func (d *deriver) term(t *ast.Term, env map[ast.Var]val, cs *[]clause) (val, bool) {
	switch v := t.Value.(type) {
	case ast.Var:
		if x, ok := env[v]; ok {
			return x, false
		}
		return nil, true
	case ast.String:
		return val{{kind: kConst, lit: string(v)}}, false
	case ast.Ref:
		return d.ref(v, env, cs), false
	case *ast.Array:
		var elem val
		for i := range v.Len() {
			x, _ := d.term(v.Elem(i), env, cs)
			elem = append(elem, orUnknown(x)...)
		}
		return collOf(elem), false
	case ast.Set:
		var elem val
		v.Foreach(func(e *ast.Term) {
			x, _ := d.term(e, env, cs)
			elem = append(elem, orUnknown(x)...)
		})
		return collOf(elem), false
	case ast.Object:
		o := &alt{kind: kObj, fields: map[string]val{}}
		err := v.Iter(func(k, e *ast.Term) error {
			ks, ok := k.Value.(ast.String)
			if !ok {
				o.other = unknown
				o.keys = append(o.keys, unknown...)
				return nil
			}
			o.keys = append(o.keys, &alt{kind: kConst, lit: string(ks)})
			x, _ := d.term(e, env, cs)
			o.fields[string(ks)] = orUnknown(x)
			return nil
		})
		if err != nil {
			return unknown, false
		}
		return val{o}, false
	case *ast.ArrayComprehension:
		return d.comprehension(v.Body, v.Term, env), false
	case *ast.SetComprehension:
		return d.comprehension(v.Body, v.Term, env), false
	}
	return unknown, false
}

func orUnknown(v val) val {
	if v == nil {
		return unknown
	}
	return v
}

// comprehension is a collection whose elements exist only when its body
// holds.
func (d *deriver) comprehension(body ast.Body, term *ast.Term, outer map[ast.Var]val) val {
	env := make(map[ast.Var]val, len(outer))
	for k, v := range outer {
		env[k] = v
	}
	cs := d.body(body, env)
	x, fresh := d.term(term, env, &cs)
	if fresh {
		x = unknown
	}
	return collOf(guarded(x, cs))
}

// ref evaluates a reference: into input, a rule of the policy or a local
// value.
func (d *deriver) ref(r ast.Ref, env map[ast.Var]val, cs *[]clause) val {
	var (
		v    val
		rest ast.Ref
	)
	switch {
	case r[0].Equal(ast.InputRootDocument):
		v, rest = d.input, r[1:]
		d.episodic = d.episodic || episodicRef(rest)
	case r[0].Equal(ast.DefaultRootDocument):
		n := len(r)
		for ; n > 1; n-- {
			if !isGround(r[:n]) {
				continue
			}
			if defs := d.c.GetRulesExact(r[:n]); len(defs) > 0 {
				break
			}
		}
		if n <= 1 {
			return unknown // data documents and undefined references
		}
		v, rest = d.rule(r[:n]), r[n:]
	default:
		lv, ok := r[0].Value.(ast.Var)
		if !ok {
			return unknown
		}
		x, bound := env[lv]
		if !bound {
			return unknown
		}
		v, rest = x, r[1:]
	}
	for _, k := range rest {
		if s, ok := k.Value.(ast.String); ok {
			v = field(v, string(s))
			continue
		}
		if kv, ok := k.Value.(ast.Var); ok {
			if _, bound := env[kv]; !bound {
				v = d.elemsWithKey(v, cs, func(key val) { env[kv] = key })
				continue
			}
		}
		v = d.elems(v, cs) // any other key: some element
	}
	return v
}

// episodicRef: input.<rest> may read the episode's facts or task (input
// as a whole, or a key that is not a constant, may too).
func episodicRef(rest ast.Ref) bool {
	if len(rest) == 0 {
		return true
	}
	k, ok := rest[0].Value.(ast.String)
	return !ok || k == "facts" || k == "task"
}

func isGround(r ast.Ref) bool {
	for _, t := range r[1:] {
		if _, ok := t.Value.(ast.String); !ok {
			return false
		}
	}
	return true
}

// rule is the value of a rule of the policy (the union of its
// definitions), memoized.
func (d *deriver) rule(r ast.Ref) val {
	key := r.String()
	if v, ok := d.vals[key]; ok {
		d.episodic = d.episodic || d.valEpisodic[key]
		if d.reads != nil {
			maps.Copy(d.reads, d.valReads[key])
		}
		return v
	}
	if v, ok := d.base[key]; ok {
		return v
	}
	if d.busy[key] || d.depth >= maxDepth {
		return unknown
	}
	d.busy[key] = true
	d.depth++
	outer, outerReads := d.episodic, d.reads
	d.episodic = false
	if outerReads != nil {
		d.reads = map[string]bool{}
	}
	defer func() {
		delete(d.busy, key)
		d.depth--
		d.valEpisodic[key] = d.episodic
		d.episodic = outer || d.episodic
		if outerReads != nil {
			d.valReads[key] = d.reads
			maps.Copy(outerReads, d.reads)
			d.reads = outerReads
		}
	}()
	var out, dflt val
	defs := d.c.GetRulesExact(r)
	skipDefault := slices.ContainsFunc(defs, func(r *ast.Rule) bool { return !r.Default && d.presentOnly(r) })
	for _, def := range defs {
		switch {
		case def.Default && skipDefault:
		case def.Default:
			dflt = append(dflt, d.ruleValue(def)...)
		default:
			out = append(out, d.ruleValue(def)...)
		}
	}
	out = append(out, textDefault(out, dflt)...)
	d.vals[key] = out
	return out
}

// textDefault is a rule's default values dflt beside its other values v:
// a default "" of a rule whose value is otherwise exactly one call text
// (`default raw := ""`, `raw := norm.raw`) is that text too, since the
// text is "" in Go whenever the field is absent (scan.callText).
func textDefault(v, dflt val) val {
	if len(v) == 0 || v[0].text == "" || slices.ContainsFunc(v, func(a *alt) bool { return a.text != v[0].text }) {
		return dflt
	}
	out := make(val, len(dflt))
	for i, a := range dflt {
		if a.kind == kConst && a.lit == "" && len(a.guard) == 0 {
			c := *a
			c.text = v[0].text
			a = &c
		}
		out[i] = a
	}
	return out
}

func (d *deriver) ruleValue(r *ast.Rule) val {
	var out val
	for ; r != nil; r = r.Else {
		if len(r.Head.Args) > 0 {
			return unknown // a function read as a value
		}
		env := map[ast.Var]val{}
		var cs []clause
		if !r.Default {
			cs = d.body(r.Body, env)
		}
		switch {
		case r.Head.RuleKind() == ast.MultiValue: // partial set
			k, fresh := d.term(r.Head.Key, env, &cs)
			if fresh {
				k = unknown
			}
			out = append(out, collOf(guarded(k, cs))...)
		case r.Head.Key != nil: // partial object
			v, fresh := d.term(r.Head.Value, env, &cs)
			if fresh {
				v = unknown
			}
			out = append(out, &alt{kind: kObj, fields: map[string]val{}, other: guarded(v, cs), keys: unknown})
		default:
			v, fresh := d.term(r.Head.Value, env, &cs)
			if fresh {
				v = unknown
			}
			out = append(out, guarded(v, cs)...)
		}
		if d.presentOnly(r) {
			break // the document is there whenever gates apply: no else is reached
		}
	}
	return out
}

// presentOnly: the body is `x = input.derived.<field>`, `x = input.facts`
// or `x = input.task`, which hold whenever Episode.Eval gates (it passes
// them then) and the deriver knows the episode.
func (d *deriver) presentOnly(r *ast.Rule) bool {
	if len(r.Body) != 1 || r.Default {
		return false
	}
	e := r.Body[0]
	var terms []*ast.Term
	switch {
	case e.IsCall() && !e.Negated && len(e.With) == 0 && len(e.Operands()) == 2 &&
		(e.Operator().String() == "eq" || e.Operator().String() == "assign"):
		terms = e.Operands()
	case r.Head.Value != nil && e.Equal(ast.NewExpr(ast.BooleanTerm(true))): // x := input.task
		terms = []*ast.Term{r.Head.Value}
	}
	for _, o := range terms {
		ref, ok := o.Value.(ast.Ref)
		if !ok || len(ref) < 2 || !ref[0].Equal(ast.InputRootDocument) {
			continue
		}
		doc, ok := ref[1].Value.(ast.String)
		if !ok || doc == "facts" || doc == "task" {
			d.episodic = true // the answer depends on whether they are known
		}
		if !ok || !d.present[string(doc)] {
			continue
		}
		if doc == "memo" {
			f, ok := ref[len(ref)-1].Value.(ast.String)
			return ok && len(ref) == 3 && (slices.Contains(memoLists, string(f)) || slices.Contains(memoRuleLists, string(f)))
		}
		if doc != "derived" {
			return len(ref) == 2
		}
		if f, ok := ref[len(ref)-1].Value.(ast.String); ok && len(ref) == 3 && slices.Contains([]string{"text", "code", "touched", "arg_paths"}, string(f)) {
			return true
		}
	}
	return false
}

// field is v.k.
func field(v val, k string) val {
	var out val
	for _, a := range v {
		switch a.kind {
		case kObj:
			a.doc.note(k)
			f, ok := a.fields[k]
			if !ok {
				f = a.other
				if a.keyed && k != "" {
					f = guarded(f, []clause{{foldASCII(k)}})
				}
			}
			out = append(out, guarded(f, a.guard)...)
		case kColl, kStr, kConst:
			// a string key into a collection or string is undefined
		default:
			out = append(out, guarded(unknown, a.guard)...)
		}
	}
	return out
}

// elems is any element (or object value) of v; the guards of the
// collections it comes from are required by whoever iterates.
func (d *deriver) elems(v val, cs *[]clause) val {
	return d.elemsWithKey(v, cs, nil)
}

// never is a literal no haystack holds but by chance: the clause {never}
// is what a value that never exists requires.
const never = "\x01never"

// requireExists adds to cs what a value's existence requires: when each of
// its alternatives exists only under a guard, one of the guards holds; a
// value with no alternative never exists.
func requireExists(v val, cs *[]clause) {
	if len(v) == 0 {
		*cs = append(*cs, clause{never})
		return
	}
	// the clauses every alternative's guard holds are all required (one
	// alternative: its whole guard)
	key := func(c clause) string { return strings.Join(c, "\x00") }
	var common []clause
	for _, g := range v[0].guard {
		k := key(g)
		if !slices.ContainsFunc(v[1:], func(a *alt) bool {
			return !slices.ContainsFunc(a.guard, func(h clause) bool { return key(h) == k })
		}) {
			common = append(common, g)
		}
	}
	if len(common) > 0 {
		*cs = append(*cs, common...)
		return
	}
	var c clause
	for _, a := range v {
		if len(a.guard) == 0 {
			return
		}
		c = append(c, best(a.guard)...)
	}
	if len(c) > 0 {
		*cs = append(*cs, c)
	}
}

func (d *deriver) elemsWithKey(v val, cs *[]clause, key func(val)) val {
	var out, keys val
	for _, a := range v {
		switch a.kind {
		case kColl:
			out = append(out, guarded(a.elem, a.guard)...)
			keys = append(keys, unknown...) // an index, or a set's element
		case kObj:
			a.doc.note("*")
			for _, f := range a.fields {
				out = append(out, guarded(f, a.guard)...)
			}
			out = append(out, guarded(a.other, a.guard)...)
			keys = append(keys, a.keys...)
		case kStr, kConst:
			out = append(out, guarded(unknown, a.guard)...) // a string's characters: numbers
		default:
			out = append(out, guarded(unknown, a.guard)...)
			keys = append(keys, unknown...)
		}
	}
	if key != nil {
		key(orUnknown(keys))
	}
	requireExists(out, cs) // iterating needs an element
	return out
}

// substrings is a part of v: a part of a string of call strings is one
// too.
func substrings(v val) val {
	var out val
	for _, a := range v {
		if a.kind == kStr || a.kind == kConst && a.lit == "" { // "" has no other substring
			out = append(out, inexact(a))
		} else {
			out = append(out, guarded(unknown, a.guard)...)
		}
	}
	return out
}

// joined is concat(sep, elems).
func joined(elems val, sep string) val {
	seps := sep
	var guards []clause
	for _, a := range elems {
		switch {
		case a.kind == kStr:
			seps += a.seps
		case a.kind == kConst && len(a.guard) == 0:
			seps += a.lit // a constant's bytes cut literals as separators do
		default:
			if len(a.guard) == 0 {
				return unknown
			}
			// the join holds such an element only when its guard holds:
			// the joined string is call strings or that guard
			guards = append(guards, best(a.guard))
		}
	}
	s := &alt{kind: kStr, seps: uniqueBytes(seps)}
	if len(guards) == 0 {
		return val{s}
	}
	// a literal in the join is in the call strings, or one of the odd
	// elements is there: an alternative per guard
	out := val{s}
	for _, g := range guards {
		out = append(out, &alt{kind: kUnknown, guard: []clause{g}})
	}
	return out
}

// requireMatched adds to cs what a test that just gave v a clause (every
// alternative requires a literal, or "" cannot match) requires besides:
// that one of v's alternatives other than "" exists, so their guards
// (lib.code's marker, a list's) hold.
func requireMatched(v val, cs *[]clause) {
	rest := slices.DeleteFunc(slices.Clone(v), func(a *alt) bool { return a.kind == kConst && a.lit == "" && len(a.guard) == 0 })
	if len(rest) > 0 {
		requireExists(rest, cs)
	}
}

func uniqueBytes(s string) string {
	b := []byte(s)
	slices.Sort(b)
	return string(slices.Compact(b))
}

func constString(v val) (string, bool) {
	if len(v) == 1 && v[0].kind == kConst && len(v[0].guard) == 0 {
		return v[0].lit, true
	}
	return "", false
}

// constStrings are the strings of a constant collection of strings.
func constStrings(v val) ([]string, bool) {
	if len(v) != 1 || v[0].kind != kColl || len(v[0].guard) != 0 {
		return nil, false
	}
	var out []string
	for _, e := range v[0].elem {
		if e.kind != kConst || len(e.guard) != 0 {
			return nil, false
		}
		out = append(out, e.lit)
	}
	return out, len(out) > 0
}

// equalClause: a == b, one side a constant string.
func equalClause(a, b val) (clause, bool) {
	if lit, ok := constString(b); ok {
		return testClause(a, []string{lit}, false)
	}
	if lit, ok := constString(a); ok {
		return testClause(b, []string{lit}, false)
	}
	return nil, false
}

// testClause is what "v contains one of lits" requires of the haystack;
// fold: the literals match case-insensitively (a (?i) regexp).
func testClause(v val, lits []string, fold bool) (clause, bool) {
	if len(v) == 0 {
		return nil, false // a value that never exists: nothing to gate on soundly without more care
	}
	return piecesClause(v, lits, func(l, seps string) string { return piece(l, seps, fold) }, !hasEmpty(lits))
}

// piecesClause is what v must show for one of pats to match it: for each
// string alternative, the part pieceOf says every match of a pattern
// holds (or, where a pattern has none, the alternative's guard); for any
// other alternative its guard. emptyNeverMatches: the constant "" matches
// no pattern, so it requires nothing. No clause when an alternative
// requires nothing.
func piecesClause(v val, pats []string, pieceOf func(pat, seps string) string, emptyNeverMatches bool) (clause, bool) {
	var c clause
	for _, a := range v {
		switch {
		case a.kind == kStr:
			for _, pat := range pats {
				p := pieceOf(pat, a.seps)
				if p == "" {
					if len(a.guard) == 0 {
						return nil, false
					}
					c = append(c, best(a.guard)...)
					continue
				}
				c = append(c, p)
			}
		case emptyNeverMatches && a.kind == kConst && a.lit == "":
			// "" contains no non-empty literal
		case len(a.guard) > 0:
			c = append(c, best(a.guard)...)
		default:
			return nil, false
		}
	}
	return c, len(c) > 0
}

func hasEmpty(lits []string) bool { return slices.Contains(lits, "") }

// piece is the part of literal l the haystack must hold when l occurs in a
// string that may join call strings with the bytes of seps: the longest
// run between separators, lowercased as the haystack is. A literal
// matched case-insensitively keeps ASCII runs only (other letters have
// case-folding partners the lowercased haystack does not unify).
func piece(l, seps string, fold bool) string {
	l = foldASCII(l)
	cut := func(r rune) bool {
		return strings.ContainsRune(seps, r) || fold && r >= utf8.RuneSelf
	}
	var b string
	for _, p := range strings.FieldsFunc(l, cut) {
		if len(p) > len(b) {
			b = p
		}
	}
	return b
}

// regexClauses is what a match of pattern in v requires: a conjunction of
// clauses, each a set of literals one of which every match contains.
func regexClauses(pattern string, v val) []clause {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	var out []clause
	for _, lits := range reCNF(re) {
		var fold, exact []string
		for _, l := range lits {
			if l.fold {
				fold = append(fold, l.s)
			} else {
				exact = append(exact, l.s)
			}
		}
		var c clause
		ok := true
		for _, g := range []struct {
			lits []string
			fold bool
		}{{fold, true}, {exact, false}} {
			if len(g.lits) == 0 {
				continue
			}
			x, okx := testClause(v, g.lits, g.fold)
			if !okx {
				ok = false
				break
			}
			c = append(c, x...)
		}
		if ok && len(c) > 0 {
			out = append(out, c) // a clause that cannot be read is dropped: the others still hold
		}
	}
	return out
}

// maxCNF bounds the literals and clauses the regexp reading multiplies out.
const maxCNF = 16

// reCNF is a conjunction of literal sets every match of re meets: each
// set holds a literal the match contains.
func reCNF(re *syntax.Regexp) [][]reLit {
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return reCNF(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return reCNF(re.Sub[0])
		}
		return nil
	case syntax.OpLiteral, syntax.OpCharClass:
		if l, ok := reLits(re); ok {
			return [][]reLit{l}
		}
		return nil
	case syntax.OpAlternate:
		if ex, ok := reExact(re); ok && !hasEmptyLit(ex) {
			return [][]reLit{ex}
		}
		// (A1∧A2)∨(B1∧B2) is the conjunction of every Ai∨Bj: multiplied
		// out while small, else one literal set per branch
		prod := [][]reLit{nil}
		for _, b := range re.Sub {
			cnf := reCNF(b)
			if len(cnf) == 0 {
				return nil // a branch that requires nothing
			}
			if len(prod)*len(cnf) > maxCNF {
				if l, ok := reLits(re); ok {
					return [][]reLit{l}
				}
				return nil
			}
			var next [][]reLit
			for _, p := range prod {
				for _, c := range cnf {
					next = append(next, append(slices.Clip(p), c...))
				}
			}
			prod = next
		}
		return prod
	case syntax.OpConcat:
		var out [][]reLit
		var run []reLit // the exact strings of the run of subexpressions so far
		inRun := false
		flush := func() {
			if inRun && len(run) > 0 && !hasEmptyLit(run) {
				out = append(out, run)
			}
			run, inRun = nil, false
		}
		for _, sub := range re.Sub {
			ex, ok := reExact(sub)
			if ok && inRun && len(run)*len(ex) <= maxCNF {
				run = crossLits(run, ex)
				continue
			}
			flush()
			if ok {
				run, inRun = ex, true
				continue
			}
			out = append(out, reCNF(sub)...)
		}
		flush()
		return out
	}
	return nil
}

// reExact is every string re matches, when they are few: a literal, a
// small class, alternatives and sequences of those, an optional one, or
// a zero-width assertion (the empty string).
func reExact(re *syntax.Regexp) ([]reLit, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return []reLit{{string(re.Rune), re.Flags&syntax.FoldCase != 0}}, true
	case syntax.OpCharClass:
		return reLits(re)
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return []reLit{{}}, true
	case syntax.OpCapture:
		return reExact(re.Sub[0])
	case syntax.OpQuest:
		ex, ok := reExact(re.Sub[0])
		if !ok || len(ex) >= maxCNF {
			return nil, false
		}
		return append(ex, reLit{}), true
	case syntax.OpAlternate:
		var out []reLit
		for _, b := range re.Sub {
			ex, ok := reExact(b)
			if !ok || len(out)+len(ex) > maxCNF {
				return nil, false
			}
			out = append(out, ex...)
		}
		return out, true
	case syntax.OpConcat:
		out := []reLit{{}}
		for _, sub := range re.Sub {
			ex, ok := reExact(sub)
			if !ok || len(out)*len(ex) > maxCNF {
				return nil, false
			}
			out = crossLits(out, ex)
		}
		return out, true
	}
	return nil, false
}

// crossLits is every a followed by every b; a literal with a
// case-folded part folds.
func crossLits(a, b []reLit) []reLit {
	out := make([]reLit, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, reLit{x.s + y.s, x.fold || y.fold})
		}
	}
	return out
}

func hasEmptyLit(ls []reLit) bool {
	return slices.ContainsFunc(ls, func(l reLit) bool { return l.s == "" })
}

type reLit struct {
	s    string
	fold bool
}

// reLits is a set of literals one of which every match of re contains.
func reLits(re *syntax.Regexp) ([]reLit, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			return nil, false
		}
		return []reLit{{string(re.Rune), re.Flags&syntax.FoldCase != 0}}, true
	case syntax.OpCapture, syntax.OpPlus:
		return reLits(re.Sub[0])
	case syntax.OpCharClass:
		// a small class: one of its characters
		var out []reLit
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				if len(out) >= 8 {
					return nil, false
				}
				out = append(out, reLit{s: string(r)})
			}
		}
		return out, len(out) > 0
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return reLits(re.Sub[0])
		}
	case syntax.OpAlternate:
		var out []reLit
		for _, s := range re.Sub {
			l, ok := reLits(s)
			if !ok {
				return nil, false
			}
			out = append(out, l...)
		}
		return out, true
	case syntax.OpConcat:
		// adjacent literals of one case mode make one longer literal
		var subs []*syntax.Regexp
		for _, s := range re.Sub {
			if n := len(subs); n > 0 && s.Op == syntax.OpLiteral && subs[n-1].Op == syntax.OpLiteral &&
				s.Flags&syntax.FoldCase == subs[n-1].Flags&syntax.FoldCase {
				m := *subs[n-1]
				m.Rune = append(slices.Clip(m.Rune), s.Rune...)
				subs[n-1] = &m
				continue
			}
			subs = append(subs, s)
		}
		var (
			bestL []reLit
			score = -1
		)
		for _, s := range subs {
			l, ok := reLits(s)
			if !ok {
				continue
			}
			sc := len(l[0].s)
			for _, x := range l {
				sc = min(sc, len(x.s))
			}
			if sc > score || sc == score && len(l) < len(bestL) {
				bestL, score = l, sc
			}
		}
		return bestL, score >= 0
	}
	return nil, false
}

// derivedGates is what deriveGates reads off a policy.
type derivedGates struct {
	byPkg        map[string][][]clause // per package, one conjunction per flag rule; nil: a rule has none
	byID         map[string][][]clause // per rule id (lib.flag's first argument, "" when not constant), one entry per rule, nil: no gate
	lits         []string              // every literal of the gates
	rules, gated int                   // flag rules, and those with a gate
	// byFeat: per feature index, the gates of the flag rules that start
	// with `input.feat.<name> == true`; a feature is absent when one of
	// them has none or the policy reads it anywhere else
	byFeat map[int][][]clause
}

// deriveGates reads the gate of every flag rule under rollcage.rules.
func deriveGates(c *ast.Compiler) derivedGates { return deriveEpisodeGates(c, nil, nil) }

// deriveEpisodeGates reads every rule's gate for one episode: its facts
// and task (nil: not known) are constants, so a rule comparing the call
// with them gets the episode's strings as its literals. gatePlan.episode
// gives the same reading only deriving again what depends on them.
func deriveEpisodeGates(c *ast.Compiler, facts, task *ast.Term) derivedGates {
	return newGatePlan(c, facts, task).gates()
}

// gatePlan is every flag rule's gate as read with some facts and task,
// and what the reading of the rules that read neither kept, so that an
// episode derives again only the rules that do (Episode facts differ from
// task to task; most rules never look at them).
type gatePlan struct {
	c        *ast.Compiler
	rules    []plannedRule
	ungated  []string       // packages whose flag may come from documents below them
	featRefs map[int]int    // per feature, how often the policy reads it
	memo     map[string]val // rule values that read neither facts nor task

	mu     sync.Mutex
	cache  map[int][]*gateEntry // guarded by mu; per rule index, gates by the values they read
	nCache int                  // guarded by mu
	nextID int                  // guarded by mu
}

// gateEntry is an episodic rule's gate as derived for some episode, with
// the fields of its facts and task the derivation read: another episode
// with the same values there gets the same gate (the derivation reads
// nothing else of them).
type gateEntry struct {
	id    int
	reads []string    // "facts\x00workdir", "task\x00*" (the whole document), sorted
	vals  []ast.Value // what each read found; nil: the field is absent
	gate  []clause
}

// maxGateEntries bounds the plan's cache; it starts over when full.
const maxGateEntries = 4096

// docValue is what read names in facts and task (both objects).
func docValue(facts, task *ast.Term, read string) ast.Value {
	doc, key, _ := strings.Cut(read, "\x00")
	t := facts
	if doc == "task" {
		t = task
	}
	if key == "*" {
		return t.Value
	}
	if x := t.Value.(ast.Object).Get(ast.InternedTerm(key)); x != nil {
		return x.Value
	}
	return nil
}

// lookup is a cached gate of rule i for these facts and task, or nil.
func (p *gatePlan) lookup(i int, facts, task *ast.Term) *gateEntry {
	p.mu.Lock()
	entries := p.cache[i]
	p.mu.Unlock()
	for _, e := range entries {
		if slices.EqualFunc(e.reads, e.vals, func(r string, v ast.Value) bool {
			w := docValue(facts, task, r)
			return (v == nil) == (w == nil) && (v == nil || v.Compare(w) == 0)
		}) {
			return e
		}
	}
	return nil
}

// store caches gate g of rule i, derived reading reads.
func (p *gatePlan) store(i int, reads map[string]bool, facts, task *ast.Term, g []clause) *gateEntry {
	e := &gateEntry{reads: slices.Sorted(maps.Keys(reads)), gate: g}
	for _, r := range e.reads {
		e.vals = append(e.vals, docValue(facts, task, r))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cache == nil || p.nCache >= maxGateEntries {
		p.cache, p.nCache = map[int][]*gateEntry{}, 0
	}
	p.nextID++
	e.id = p.nextID
	p.cache[i] = append(p.cache[i], e)
	p.nCache++
	return e
}

// plannedRule is one flag rule under rollcage.rules.<pkg>.
type plannedRule struct {
	rule     *ast.Rule
	pkg, id  string
	feat     int      // the feature its body starts testing, -1: none
	gate     []clause // nil: none
	episodic bool     // the gate read the facts or the task
}

// newGatePlan derives every flag rule's gate with facts and task.
func newGatePlan(c *ast.Compiler, facts, task *ast.Term) *gatePlan {
	d := newDeriver(c, facts, task)
	p := &gatePlan{c: c, featRefs: featureRefs(c), memo: map[string]val{}}
	ungated := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(c.Modules)) { // in one order: the memo depends on it
		m := c.Modules[name]
		path := m.Package.Path
		if len(path) < 4 || !path.HasPrefix(rulesRef) {
			continue
		}
		s, ok := path[3].Value.(ast.String)
		if !ok {
			continue
		}
		pkg := string(s)
		if len(path) > 4 {
			ungated[pkg] = true // documents below the package may hold its flag
			continue
		}
		for _, r := range m.Rules {
			ref := r.Head.Ref()
			if len(ref) == 0 || !ref[0].Equal(ast.VarTerm("flag")) {
				continue
			}
			pr := plannedRule{rule: r, pkg: pkg, id: ruleID(r), feat: -1}
			if b := featureTest(r); b != 0 {
				pr.feat = bits.TrailingZeros64(b)
			}
			if len(ref) == 1 {
				pr.gate, pr.episodic = d.episodeGate(r)
			}
			p.rules = append(p.rules, pr)
		}
	}
	for pkg := range ungated {
		p.ungated = append(p.ungated, pkg)
	}
	for k, v := range d.vals {
		if !d.valEpisodic[k] {
			p.memo[k] = v
		}
	}
	return p
}

// episode is the plan of an episode's facts and task: the plan's own
// gates for rules that read neither, for the others those of an earlier
// episode that had the same values where they read, else derived again.
// key names the gates' sources: two episodes with one key have the same
// gates ("": not known), so a caller that has them assembled for the key
// need not assemble them again (gates).
func (p *gatePlan) episode(facts, task *ast.Term) (ep *gatePlan, key string) {
	d := newDeriver(p.c, facts, task)
	d.base = p.memo
	_, fo := facts.Value.(ast.Object)
	_, to := task.Value.(ast.Object)
	cached := fo && to
	if cached {
		d.trackDocs()
		d.valReads = map[string]map[string]bool{}
	}
	var ids []string
	rs := slices.Clone(p.rules)
	for i := range rs {
		if !rs[i].episodic {
			continue
		}
		if !cached {
			rs[i].gate, _ = d.episodeGate(rs[i].rule)
			continue
		}
		e := p.lookup(i, facts, task)
		if e == nil {
			d.reads = map[string]bool{}
			g, _ := d.episodeGate(rs[i].rule)
			e = p.store(i, d.reads, facts, task, g)
		}
		rs[i].gate = e.gate
		ids = append(ids, strconv.Itoa(e.id))
	}
	if cached {
		key = strings.Join(ids, ",")
	}
	return &gatePlan{rules: rs, ungated: p.ungated, featRefs: p.featRefs}, key
}

// gates assembles the plan's rules' gates.
func (p *gatePlan) gates() derivedGates {
	out := derivedGates{byPkg: map[string][][]clause{}, byID: map[string][][]clause{}, byFeat: map[int][][]clause{}}
	featSeen := map[int]int{}
	ungated := map[string]bool{}
	for _, pkg := range p.ungated {
		ungated[pkg] = true
	}
	never := map[int]bool{} // features one of whose rules has no gate
	for _, r := range p.rules {
		out.rules++
		g := r.gate
		if r.feat >= 0 {
			featSeen[r.feat]++
			if g == nil {
				never[r.feat] = true
			} else {
				out.byFeat[r.feat] = append(out.byFeat[r.feat], g)
			}
		}
		out.byID[r.id] = append(out.byID[r.id], g)
		if g == nil {
			ungated[r.pkg] = true
			continue
		}
		out.gated++
		out.byPkg[r.pkg] = append(out.byPkg[r.pkg], g)
		for _, cl := range g {
			out.lits = append(out.lits, cl...)
		}
	}
	for p := range ungated {
		out.byPkg[p] = nil
	}
	for i := range out.byFeat {
		if never[i] || p.featRefs[i] != featSeen[i] {
			delete(out.byFeat, i) // read elsewhere, or by a rule without a gate
		}
	}
	return out
}

// episodeGate is ruleGate and whether the gate read the episode's facts
// or task.
func (d *deriver) episodeGate(r *ast.Rule) ([]clause, bool) {
	d.episodic = false
	g := d.ruleGate(r)
	return g, d.episodic
}

var (
	rulesRef = ast.MustParseRef("data.rollcage.rules")
	flagRef  = ast.MustParseRef("data.rollcage.lib.flag")
)

// featureRefs counts, per feature index, the references to
// input.feat.<name> in the policy.
func featureRefs(c *ast.Compiler) map[int]int {
	n := map[int]int{}
	for _, m := range c.Modules {
		ast.WalkRefs(m, func(r ast.Ref) bool {
			if len(r) < 2 || !r[0].Equal(ast.InputRootDocument) || !r[1].Equal(ast.InternedTerm("feat")) {
				return false
			}
			if len(r) >= 3 {
				if name, ok := r[2].Value.(ast.String); ok {
					if b := featureBit(string(name)); b != 0 {
						n[bits.TrailingZeros64(b)]++
						return false
					}
				}
			}
			for i := range features { // input.feat as a whole, or a computed key: every feature
				n[i] = -1
			}
			return false
		})
	}
	return n
}

// ruleID is the rule id a flag rule passes to lib.flag, "" when it is not
// a constant.
func ruleID(r *ast.Rule) string {
	for _, e := range r.Body {
		if !e.IsCall() || !e.Operator().Equal(flagRef) || len(e.Operands()) == 0 {
			continue
		}
		if s, ok := e.Operands()[0].Value.(ast.String); ok {
			return string(s)
		}
	}
	return ""
}

// members are the elements of v, its guards kept on them; unlike elems
// it requires nothing of v (a join or a union of an empty collection
// exists).
func members(v val) val {
	var out val
	for _, a := range v {
		switch a.kind {
		case kColl:
			out = append(out, guarded(a.elem, a.guard)...)
		case kObj:
			a.doc.note("*")
			for _, f := range a.fields {
				out = append(out, guarded(f, a.guard)...)
			}
			out = append(out, guarded(a.other, a.guard)...)
		default:
			out = append(out, guarded(unknown, a.guard)...)
		}
	}
	return out
}

func constVal(s string) val { return val{{kind: kConst, lit: s}} }

// constArray is the strings of an array term each of whose elements is one
// constant.
func (d *deriver) constArray(t *ast.Term, env map[ast.Var]val, cs *[]clause) ([]string, bool) {
	arr, ok := t.Value.(*ast.Array)
	if !ok {
		return nil, false
	}
	var out []string
	for i := range arr.Len() {
		v, fresh := d.term(arr.Elem(i), env, cs)
		lit, ok := constString(v)
		if fresh || !ok {
			return nil, false
		}
		out = append(out, lit)
	}
	return out, true
}

// constAlts are the strings of a value each of whose alternatives is an
// unguarded constant string (none: a value that never exists).
func constAlts(v val) ([]string, bool) {
	out := []string{}
	for _, a := range v {
		if a.kind != kConst || len(a.guard) != 0 {
			return nil, false
		}
		out = append(out, a.lit)
	}
	return out, true
}

// foldConst computes a string builtin of constants, as OPA does.
func foldConst(name string, args []val) (val, bool) {
	if len(args) == 0 {
		return nil, false
	}
	xs, ok := constAlts(args[0])
	if !ok || len(xs) == 0 || len(xs) > 256 {
		return nil, false
	}
	var arg string
	switch name {
	case "lower", "upper", "trim_space":
		if len(args) != 1 {
			return nil, false
		}
	case "trim", "trim_left", "trim_right", "trim_prefix", "trim_suffix", "split":
		if len(args) != 2 {
			return nil, false
		}
		if arg, ok = constString(args[1]); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	var out val
	for _, x := range xs {
		var r string
		switch name {
		case "lower":
			r = strings.ToLower(x)
		case "upper":
			r = strings.ToUpper(x)
		case "trim_space":
			r = strings.TrimSpace(x)
		case "trim":
			r = strings.Trim(x, arg)
		case "trim_left":
			r = strings.TrimLeft(x, arg)
		case "trim_right":
			r = strings.TrimRight(x, arg)
		case "trim_prefix":
			r = strings.TrimPrefix(x, arg)
		case "trim_suffix":
			r = strings.TrimSuffix(x, arg)
		case "split":
			var elem val
			for _, p := range strings.Split(x, arg) {
				elem = append(elem, constVal(p)...)
			}
			out = append(out, collOf(elem)...)
			continue
		}
		out = append(out, &alt{kind: kConst, lit: r})
	}
	return out, true
}

// suffixOnly: every match of the pattern ends the text (it ends in \z or
// a $ outside multi-line mode), so replacing matches rewrites a suffix.
func suffixOnly(pattern string) bool {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return false
	}
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	return re.Op == syntax.OpConcat && len(re.Sub) > 0 && re.Sub[len(re.Sub)-1].Op == syntax.OpEndText
}

// joinedWith is v with the bytes of extra added as separators.
func joinedWith(v val, extra string) val {
	out := make(val, len(v))
	for i, a := range v {
		c := *a
		if c.kind == kStr {
			c.seps = uniqueBytes(c.seps + extra)
		}
		c.text = ""
		out[i] = &c
	}
	return out
}

// globClause is what glob.match(g, _, v) requires for one of the globs: a
// piece of the glob's literal runs before its first class, alternative or
// escape (every match holds them) — the last piece of three bytes or more
// of the last run, the most specific part of a path, or else the longest.
func globClause(globs []string, v val) (clause, bool) {
	if len(globs) == 0 {
		return clause{never}, true
	}
	return piecesClause(v, globs, globPiece, false)
}

func globPiece(g, seps string) string {
	if i := strings.IndexAny(g, "[{\\"); i >= 0 {
		g = g[:i]
	}
	runs := strings.FieldsFunc(g, func(r rune) bool { return r == '*' || r == '?' })
	var longest, last string
	for _, r := range runs {
		for _, p := range strings.FieldsFunc(foldASCII(r), func(r rune) bool { return strings.ContainsRune(seps, r) }) {
			if len(p) > len(longest) {
				longest = p
			}
			if len(p) >= 3 {
				last = p
			}
		}
	}
	if last != "" {
		return last
	}
	return longest
}

// A regexp clause is a literal of its own kind: "\x02", the name of the
// call text it searches (scan.callText), "\x00", the pattern. It is satisfied
// when the pattern matches that text, which gateSet.resolve finds out in
// Go for the rules whose other clauses hold: a rule that searches lib.code
// for a pattern the literals cannot pin down (special.comment wants
// "for", "to" or "test" somewhere, and most code has them) then costs a
// regexp search and no evaluation, when nothing matches. The text must be
// exactly what input.derived or input.normalized passes (alt.text): a
// part of it (substrings), a join (joined, joinedWith) or anything
// computed from it is not.
const regexMark = "\x02"

// exactly is v, each alternative tagged as the call text name.
func exactly(v val, name string) val {
	out := make(val, len(v))
	for i, a := range v {
		c := *a
		c.text = name
		out[i] = &c
	}
	return out
}

// inexact is a without its text tag: something made from the text.
func inexact(a *alt) *alt {
	if a.text == "" {
		return a
	}
	c := *a
	c.text = ""
	return &c
}

// regexLit is the regexp clause's literal for pattern searching v, when
// every alternative of v is one call text and Go's regexp takes the
// pattern as OPA's builtins do (a pattern they reject errs there, which a
// closed gate would hide), and the pattern does not match "": a value
// read as the text may be "" where the text is not (textDefault takes a
// rule's default "" for it, whatever left the rule undefined), and a
// pattern that cannot match "" finds nothing there either.
func regexLit(pattern string, v val) (string, bool) {
	if len(v) == 0 || v[0].text == "" {
		return "", false
	}
	for _, a := range v[1:] {
		if a.text != v[0].text {
			return "", false
		}
	}
	if re := regexpPlan(pattern).re; re == nil || re.MatchString("") {
		return "", false
	}
	return regexMark + v[0].text + "\x00" + pattern, true
}

// parseRegexLit splits a regexp clause's literal; ok false for any other.
func parseRegexLit(l string) (text, pattern string, ok bool) {
	rest, ok := strings.CutPrefix(l, regexMark)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "\x00")
}
