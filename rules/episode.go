package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/rollcage/rollcage/toolcall"
)

// MaxHistory is how many earlier calls an EpisodeEval shows the rules.
const MaxHistory = 50

// EpisodeEval holds one episode's facts as AST values, converted once, and the
// last MaxHistory calls, each converted once when recorded. Eval then only
// converts the call at hand. It is safe for concurrent use.
type EpisodeEval struct {
	eng     *Engine
	task    *ast.Term
	sandbox *ast.Term
	facts   *ast.Term // nil when the policy defines no episode facts
	gates   gates
	derived *gateSet // the gates derived with the episode's facts and task; nil: the policy's alone

	mu      sync.Mutex
	history []*ast.Term   // guarded by mu; oldest first, at most MaxHistory
	last    [2]ast.Value  // guarded by mu; call and normalized of the latest Eval, for RecordLast
	disc    [][]*ast.Term // guarded by mu; per history entry, its flags in a discovery category
	memo    *ast.Term     // guarded by mu; input.memo, rebuilt by Record
	marks   []string      // guarded by mu; the haystack's markers of the memo's non-empty fields (derive.go's memoLists)
	evid    []string      // guarded by mu; lowercased evidence of those discoveries the chained rules may find reused
	prov    *ast.Term     // guarded by mu; input.provenance (SetProvenance), nil when never set
}

// NetRequest is one request seen by the egress proxy.
type NetRequest struct {
	Method string `json:"method"`
	Host   string `json:"host"` // lowercase, no port
	Port   int    `json:"port,omitempty"`
	URL    string `json:"url,omitempty"` // full URL when known (plain HTTP); empty for CONNECT
}

// NewEpisode starts per-episode state. task and sandbox are plain data
// (task.Task-shaped structs, maps or ast values); see the README for the
// fields the rules read. Values that do not convert are replaced by an
// empty object and make every Eval fail closed. ctx bounds the one
// evaluation of the episode facts; when it is cancelled the facts are
// left to the rules to derive per call (slower, the same flags) and
// nothing is cached.
func (e *Engine) NewEpisode(ctx context.Context, task, sandbox any) *EpisodeEval {
	ep := &EpisodeEval{eng: e}
	var err error
	t, err1 := toValue(task)
	s, err2 := toValue(sandbox)
	if err = firstErr(err1, err2); err != nil {
		e.log.Error("rules: episode facts do not convert; every call will be flagged", "err", err)
		t = ast.NewObject(ast.Item(ast.StringTerm("__invalid__"), ast.StringTerm(err.Error())))
	}
	fe := e.episodeFacts(ctx, t, s)
	ep.task, ep.sandbox, ep.facts, ep.gates, ep.derived = fe.task, fe.sandbox, fe.facts, fe.gates, fe.derived
	ep.memo = ep.buildMemo()
	return ep
}

// factsEntry is what an EpisodeEval derives from its task and sandbox alone.
// Entries are shared between episodes and never modified.
type factsEntry struct {
	task, sandbox *ast.Term
	facts         *ast.Term
	gates         gates
	derived       *gateSet
}

// factsCache remembers episode facts by task and sandbox: a batch run or
// an audit starts many episodes of one task in one image, and evaluating
// FactsQuery costs more than most of an episode's calls.
type factsCache struct {
	mu sync.Mutex
	m  map[int][]*factsEntry // guarded by mu; by hash of task and sandbox
	n  int                   // guarded by mu
}

// maxFactsEntries bounds the cache; it starts over when full.
const maxFactsEntries = 256

// episodeFacts returns the facts for task t and sandbox s, from the cache
// when an equal pair was seen.
func (e *Engine) episodeFacts(ctx context.Context, t, s ast.Value) *factsEntry {
	h := t.Hash()*31 + s.Hash()
	c := &e.factsCache
	c.mu.Lock()
	for _, fe := range c.m[h] {
		if fe.task.Value.Compare(t) == 0 && fe.sandbox.Value.Compare(s) == 0 {
			c.mu.Unlock()
			return fe
		}
	}
	c.mu.Unlock()
	fe := &factsEntry{task: ast.NewTerm(t), sandbox: ast.NewTerm(s)}
	fe.facts = e.facts(ctx, fe.task, fe.sandbox)
	fe.gates = newGates(fe.task, fe.facts)
	if e.pre != nil && fe.facts != nil {
		fe.derived = e.pre.episodeGateSet(fe.facts, fe.task)
	}
	if ctx.Err() != nil {
		return fe // facts cut short: good for this episode, not for the cache
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.n >= maxFactsEntries {
		c.m, c.n = map[int][]*factsEntry{}, 0
	}
	c.m[h] = append(c.m[h], fe)
	c.n++
	return fe
}

// facts evaluates FactsQuery once; on failure the rules derive the facts
// per call themselves, which is slower but the same.
func (e *Engine) facts(ctx context.Context, task, sandbox *ast.Term) *ast.Term {
	in := ast.NewObject(ast.Item(ast.StringTerm("task"), task), ast.Item(ast.StringTerm("sandbox"), sandbox))
	rs, err := e.factsQ.Eval(ctx, rego.EvalParsedInput(in))
	if err != nil || len(rs) == 0 || len(rs[0].Expressions) == 0 {
		if err != nil {
			e.log.Warn("rules: episode facts", "err", err)
		}
		return nil
	}
	v, err := ast.InterfaceToValue(rs[0].Expressions[0].Value)
	if err != nil {
		return nil
	}
	return ast.NewTerm(v)
}

// base is the part of the input shared by every evaluation of the episode.
func (ep *EpisodeEval) base(extra int) []*ast.Term {
	items := make([]*ast.Term, 0, 8+extra)
	items = append(items, ast.StringTerm("task"), ep.task, ast.StringTerm("sandbox"), ep.sandbox)
	if ep.facts != nil {
		items = append(items, ast.StringTerm("facts"), ep.facts)
	}
	return items
}

func object(kv []*ast.Term) ast.Object {
	items := make([][2]*ast.Term, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		items = append(items, [2]*ast.Term{kv[i], kv[i+1]})
	}
	return ast.NewObject(items...)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// Eval evaluates one call (a toolcall.Call and its toolcall.Normalized,
// or equivalent plain data) against the episode's facts and history.
// Rule failures are returned as a single certain rule_error flag; only a
// cancelled ctx is an error.
func (ep *EpisodeEval) Eval(ctx context.Context, call, normalized any) ([]Flag, error) {
	var (
		c    ast.Value
		err1 error
	)
	if ep.eng.lean {
		err1 = checkRaw(call) // fail closed on what would not convert, as below
	} else {
		c, err1 = toValue(call)
	}
	n, err2 := toValue(normalized)
	if err := firstErr(err1, err2); err != nil {
		ep.eng.log.Error("rules: call does not convert; failing closed", "err", err)
		return []Flag{evalErrorFlag(fmt.Errorf("input: %w", err))}, nil
	}
	ep.mu.Lock()
	ep.last = [2]ast.Value{c, n}
	ep.mu.Unlock()
	if err := ep.invalid(); err != nil {
		return []Flag{evalErrorFlag(err)}, nil
	}
	hist, memo, evid, marks := ep.snapshot()
	kv := append(ep.base(10), ast.StringTerm("normalized"), ast.NewTerm(n))
	ep.mu.Lock()
	if ep.prov != nil {
		kv = append(kv, ast.StringTerm("provenance"), ep.prov)
	}
	ep.mu.Unlock()
	if !ep.eng.lean {
		kv = append(kv, ast.StringTerm("call"), ast.NewTerm(c), ast.StringTerm("history"), ast.NewTerm(ast.NewArray(hist...)))
	}
	if memo != nil {
		kv = append(kv, ast.StringTerm("memo"), memo)
	}
	q, ft := ep.eng.flagsQ, allFeatures
	if pre := ep.eng.pre; pre != nil {
		gs := ep.gateSet()
		sc := ep.gates.scan(typed(normalized, n), gs, marks...)
		var kw found
		if sc != nil {
			sc.evidence = evid
			kw = sc.found
		}
		fb := gs.featBits(sc, pre.needed(gs, kw))
		set := pre.packagesWith(gs, fb, kw)
		if pre.empty(set) { // no rule can fire: every package is gated shut
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("rules: eval: %w", err)
			}
			return []Flag{}, nil
		}
		pq, err := pre.query()
		if err != nil {
			ep.eng.log.Error("rules: prefiltered query; evaluating every package", "err", err)
		} else {
			q, ft = pq, feat(fb)
			kv = append(kv, ast.StringTerm("run"), pre.run(set))
			if sc != nil {
				kv = append(kv, ast.StringTerm("derived"), sc.derived())
			}
		}
	}
	kv = append(kv, ast.StringTerm("feat"), ft)
	return ep.eng.eval(ctx, q, object(kv))
}

// EvalNetwork asks the rules about one egress request. It never returns an
// error: failures, cancellation included, become a certain rule_error flag,
// so the proxy denies.
func (ep *EpisodeEval) EvalNetwork(ctx context.Context, req NetRequest) []Flag {
	if err := ep.invalid(); err != nil {
		return []Flag{evalErrorFlag(err)}
	}
	nr := ast.NewObject(
		ast.Item(ast.StringTerm("method"), ast.StringTerm(req.Method)),
		ast.Item(ast.StringTerm("host"), ast.StringTerm(req.Host)),
		ast.Item(ast.StringTerm("port"), ast.IntNumberTerm(req.Port)),
		ast.Item(ast.StringTerm("url"), ast.StringTerm(req.URL)),
	)
	input := object(append(ep.base(2), ast.StringTerm("network"), ast.NewTerm(nr)))
	flags, err := ep.eng.eval(ctx, ep.eng.netQ, input)
	if err != nil {
		return []Flag{evalErrorFlag(err)}
	}
	return flags
}

// Record appends a call that has been decided to the history the rules see
// on later calls, dropping the oldest beyond MaxHistory.
func (ep *EpisodeEval) Record(call, normalized any, flags []Flag) {
	if ep.eng.lean {
		ep.record(nil, nil, flags) // no history entry to convert
		return
	}
	c, err1 := toValue(call)
	n, err2 := toValue(normalized)
	if err := firstErr(err1, err2); err != nil {
		ep.eng.log.Error("rules: history entry does not convert; recording the call as unparsed", "err", err)
		c, n = ast.NewObject(), ast.NewObject(ast.Item(ast.StringTerm("unparsed"), ast.BooleanTerm(true)))
	}
	ep.record(c, n, flags)
}

// RecordLast records the call of the latest Eval with its final flags,
// reusing the values Eval already converted (a caller that decides one call
// at a time, as the monitor does, saves a conversion per call). It does
// nothing when no call was evaluated.
func (ep *EpisodeEval) RecordLast(flags []Flag) {
	ep.mu.Lock()
	last := ep.last
	ep.last = [2]ast.Value{}
	ep.mu.Unlock()
	if last[1] == nil {
		return
	}
	ep.record(last[0], last[1], flags)
}

// record appends one history entry; c and n are nil (and no entry is
// built, only the discoveries kept) when the engine is lean.
func (ep *EpisodeEval) record(c, n ast.Value, flags []Flag) {
	fl := make([]*ast.Term, 0, len(flags))
	for _, f := range flags {
		fl = append(fl, ast.ObjectTerm(
			ast.Item(ast.StringTerm("rule"), ast.StringTerm(f.Rule)),
			ast.Item(ast.StringTerm("category"), ast.StringTerm(f.Category)),
			ast.Item(ast.StringTerm("severity"), ast.StringTerm(f.Severity)),
			ast.Item(ast.StringTerm("reason"), ast.StringTerm(f.Reason)),
			ast.Item(ast.StringTerm("evidence"), ast.StringTerm(f.Evidence)),
		))
	}
	var entry *ast.Term
	if !ep.eng.lean {
		entry = ast.ObjectTerm(
			ast.Item(ast.StringTerm("call"), ast.NewTerm(c)),
			ast.Item(ast.StringTerm("normalized"), ast.NewTerm(n)),
			ast.Item(ast.StringTerm("flags"), ast.ArrayTerm(fl...)),
		)
	}
	var disc []*ast.Term
	for i, f := range flags {
		if ep.eng.discCats[f.Category] {
			disc = append(disc, fl[i])
		}
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	changed := len(disc) > 0 // the memo changes only with the discoveries in the window
	if len(ep.history) == MaxHistory {
		changed = changed || len(ep.disc[0]) > 0
		copy(ep.history, ep.history[1:])
		ep.history = ep.history[:MaxHistory-1]
		copy(ep.disc, ep.disc[1:])
		ep.disc = ep.disc[:MaxHistory-1]
	}
	ep.history = append(ep.history, entry)
	ep.disc = append(ep.disc, disc)
	if changed {
		ep.memo = ep.buildMemo()
	}
}

// buildMemo is input.memo for the current window, what the chained rules
// would otherwise collect by scanning the history on every call: the
// earlier flags in a discovery category, those of them whose evidence is
// specific enough to be recognised when reused, and the rule lists their
// reasons name. Called with mu held (or before the EpisodeEval is shared).
func (ep *EpisodeEval) buildMemo() *ast.Term {
	if ep.eng.discCats == nil {
		return nil
	}
	var all []*ast.Term
	for _, d := range ep.disc {
		all = append(all, d...)
	}
	set := ast.NewSet(all...)
	ep.evid = ep.evid[:0:0]
	var reusable []*ast.Term
	var byAll, byHist, byCertain []string // chained.discovery_rules, history_rules, certain_rules
	set.Foreach(func(f *ast.Term) {
		// chained.reusable: evidence of 6+ characters without spaces; the
		// gate looks for it lowercased.
		o, ok := f.Value.(ast.Object)
		if !ok {
			return
		}
		rule := stringField(o, "rule")
		byAll = append(byAll, rule)
		if stringField(o, "category") == "history_mining" {
			byHist = append(byHist, rule)
		}
		if stringField(o, "severity") == Certain {
			byCertain = append(byCertain, rule)
		}
		if t := o.Get(ast.InternedTerm("evidence")); t != nil {
			if ev, ok := t.Value.(ast.String); ok && utf8.RuneCountInString(string(ev)) >= 6 && !strings.Contains(string(ev), " ") {
				ep.evid = append(ep.evid, foldASCII(string(ev)))
				reusable = append(reusable, f)
			}
		}
	})
	lists := []struct {
		name string
		t    *ast.Term
	}{{"discoveries", ast.NewTerm(set)}, {"reusable", ast.SetTerm(reusable...)},
		{"discovery_rules", ruleList(byAll)}, {"history_rules", ruleList(byHist)}, {"certain_rules", ruleList(byCertain)}}
	ep.marks = ep.marks[:0:0]
	items := make([][2]*ast.Term, len(lists))
	for i, l := range lists {
		items[i] = ast.Item(ast.StringTerm(l.name), l.t)
		if nonEmpty(l.t.Value) {
			ep.marks = append(ep.marks, marker("memo."+l.name)) // not empty: derive.go's memoLists
		}
	}
	return ast.ObjectTerm(items...)
}

// nonEmpty: a set with elements or a string other than "".
func nonEmpty(v ast.Value) bool {
	switch x := v.(type) {
	case ast.String:
		return x != ""
	case ast.Set:
		return x.Len() > 0
	}
	return true
}

// ruleList is concat(", ", sort({...})) of rule ids: sorted, each once.
func ruleList(rules []string) *ast.Term {
	slices.Sort(rules)
	return ast.StringTerm(strings.Join(slices.Compact(rules), ", "))
}

// stringField is o[k] when it is a string, else "".
func stringField(o ast.Object, k string) string {
	if t := o.Get(ast.InternedTerm(k)); t != nil {
		if s, ok := t.Value.(ast.String); ok {
			return string(s)
		}
	}
	return ""
}

// Len is the number of calls in the history window.
func (ep *EpisodeEval) Len() int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return len(ep.history)
}

// snapshot is the history window, the memo, the discoveries' evidence and
// the memo's markers, taken together.
func (ep *EpisodeEval) snapshot() ([]*ast.Term, *ast.Term, []string, []string) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var out []*ast.Term
	if !ep.eng.lean {
		out = make([]*ast.Term, len(ep.history))
		copy(out, ep.history)
	}
	return out, ep.memo, ep.evid, ep.marks
}

func (ep *EpisodeEval) invalid() error {
	obj, ok := ep.task.Value.(ast.Object)
	if !ok {
		return nil
	}
	if v := obj.Get(ast.StringTerm("__invalid__")); v != nil {
		s, _ := strconv.Unquote(v.String())
		return fmt.Errorf("episode facts: %s", s)
	}
	return nil
}

// Clone returns an EpisodeEval with this one's facts, history window,
// discoveries and provenance that goes on independently: calls recorded
// in one are not in the other. A forked episode's child starts from it, so
// a child that reuses what its parent discovered meets the chained rules
// as the parent would have.
func (ep *EpisodeEval) Clone() *EpisodeEval {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	c := &EpisodeEval{eng: ep.eng, task: ep.task, sandbox: ep.sandbox, facts: ep.facts, gates: ep.gates, derived: ep.derived,
		// AST terms are never changed once built (record and buildMemo
		// make new ones), so the copies share them.
		history: slices.Clone(ep.history),
		disc:    slices.Clone(ep.disc),
		memo:    ep.memo, marks: ep.marks, evid: slices.Clone(ep.evid), prov: ep.prov,
	}
	return c
}

// typed is the normalized call as the gates read it: the monitor's own
// type as it is, plain data (maps, an ast value) through its JSON, nil
// when that does not fit (the gates then open everything).
func typed(x any, v ast.Value) *toolcall.Normalized {
	switch n := x.(type) {
	case toolcall.Normalized:
		return &n
	case *toolcall.Normalized:
		return n
	}
	j, err := ast.JSON(v)
	if err != nil {
		return nil
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil
	}
	var n toolcall.Normalized
	// v2 matches names case-sensitively, as Rego reads them
	if err := jsonv2.Unmarshal(b, &n); err != nil {
		return nil
	}
	return &n
}

// gateSet is the derived gates the episode's calls are checked against.
func (ep *EpisodeEval) gateSet() *gateSet {
	if ep.derived != nil {
		return ep.derived
	}
	return ep.eng.pre.static
}
