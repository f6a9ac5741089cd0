package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/rollcage/rollcage/rules/gate"
	"github.com/rollcage/rollcage/toolcall"
)

// MaxHistory is how many earlier calls an EpisodeEval shows the rules.
const MaxHistory = 50

// EpisodeEval holds one episode's facts as AST values, converted once, and
// the episode's history: the last MaxHistory calls, each converted once
// when recorded, with what the judge is shown of them (Recent). Eval then
// only converts the call at hand.
//
// An episode's calls come one at a time, so EpisodeEval has no lock: its
// owner serializes Eval, Record, RecordLast, SetProvenance, Recent, Len and
// Clone. EvalNetwork reads only the episode's facts, which never change,
// and may run beside any of them (the egress proxy asks while a call runs).
type EpisodeEval struct {
	eng     *Engine
	task    *ast.Term
	sandbox *ast.Term
	facts   *ast.Term          // nil when the policy defines no episode facts
	gate    *gate.EpisodeFacts // what the gates know of the episode

	history []*entry       // oldest first, at most MaxHistory
	last    *entry         // the call of the latest Eval, for RecordLast
	disc    [][]*ast.Term  // per history entry, its flags in a discovery category
	cats    [][]string     // per history entry, the categories of its flags
	ncat    map[string]int // flags per category in the window
	memo    *ast.Term      // input.memo, rebuilt by Record
	evid    []string       // lowercased evidence of those discoveries the chained rules may find reused
	prov    *ast.Term      // input.provenance (SetProvenance), nil when never set
}

// Shown is one recorded call as the history shows it to readers other
// than the rules (the judge): the call on one line, the start of its
// output, and the ids of the rules that flagged it (filled in when
// recorded).
type Shown struct {
	Call   string
	Output string
	Rules  []string
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
	ep.task, ep.sandbox, ep.facts, ep.gate = fe.task, fe.sandbox, fe.facts, fe.gate
	ep.memo = ep.buildMemo()
	return ep
}

// factsEntry is what an EpisodeEval derives from its task and sandbox alone.
// Entries are shared between episodes and never modified.
type factsEntry struct {
	task, sandbox *ast.Term
	facts         *ast.Term
	gate          *gate.EpisodeFacts
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
	fe.gate = gateEpisode(fe.facts, fe.task)
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
	last := &entry{call: call, norm: normalized}
	ep.last = last                         // recorded by RecordLast even when the call fails closed
	if err := checkRaw(call); err != nil { // what toValue would fail on
		ep.eng.log.Error("rules: call does not convert; failing closed", "err", err)
		return []Flag{evalErrorFlag(fmt.Errorf("input: %w", err))}, nil
	}
	if err := ep.invalid(); err != nil {
		return []Flag{evalErrorFlag(err)}, nil
	}
	var gateObj, run, derived *ast.Term
	if gt := ep.eng.gating; gt != nil {
		n := typed(normalized)
		if n == nil { // plain data: the gates read it through its value
			if err := last.convert(ep.eng.readsCall); err != nil {
				return ep.convertError(err), nil
			}
			n = typedValue(last.nv)
		}
		h := ep.gateHistory()
		gateObj, run, derived = gt.open(n, gt.set.Open(n, ep.gate, h))
		if run == nil { // every gate is shut: no rule can fire
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("rules: eval: %w", err)
			}
			return []Flag{}, nil
		}
	}
	if err := last.convert(ep.eng.readsCall); err != nil {
		return ep.convertError(err), nil
	}
	hist, memo, prov := ep.snapshot()
	kv := append(ep.base(14), ast.StringTerm("normalized"), ast.NewTerm(last.nv))
	if ep.eng.readsCall {
		kv = append(kv, ast.StringTerm("call"), ast.NewTerm(last.cv))
	}
	if ep.eng.readsHistory {
		kv = append(kv, ast.StringTerm("history"), ast.NewTerm(ast.NewArray(hist...)))
	}
	if prov != nil {
		kv = append(kv, ast.StringTerm("provenance"), prov)
	}
	if memo != nil {
		kv = append(kv, ast.StringTerm("memo"), memo)
	}
	q := ep.eng.flagsQ
	if gt := ep.eng.gating; gt != nil {
		if rq, err := gt.query(ep.eng.prep); err != nil {
			ep.eng.log.Error("rules: gated query; evaluating every package", "err", err)
		} else {
			q = rq
			kv = append(kv, ast.StringTerm("run"), run)
		}
		kv = append(kv, ast.StringTerm("gate"), gateObj)
		if derived != nil {
			kv = append(kv, ast.StringTerm("derived"), derived)
		}
	}
	return ep.eng.eval(ctx, q, object(kv))
}

func (ep *EpisodeEval) convertError(err error) []Flag {
	ep.eng.log.Error("rules: call does not convert; failing closed", "err", err)
	return []Flag{evalErrorFlag(fmt.Errorf("input: %w", err))}
}

// entry is one call of the history window. Its call and normalized call
// are converted to AST values when an evaluation first needs them: a
// policy that reads no history (Engine.readsHistory) never converts an
// entry, and one that does converts it only if a later call is evaluated
// while it is in the window.
type entry struct {
	call, norm any       // as given
	cv, nv     ast.Value // converted; cv nil when the call was not
	flags      []*ast.Term
	term       *ast.Term // {call, normalized, flags}; nil until needed
	shown      Shown
}

// convert converts the entry's normalized call and, withCall, its call,
// each once.
func (e *entry) convert(withCall bool) error {
	if e.nv == nil {
		n, err := toValue(e.norm)
		if err != nil {
			return err
		}
		e.nv = n
	}
	if withCall && e.cv == nil {
		c, err := toValue(e.call)
		if err != nil {
			return err
		}
		e.cv = c
	}
	return nil
}

// value is the entry as input.history holds it.
func (e *entry) value(log interface{ Error(string, ...any) }) *ast.Term {
	if e.term != nil {
		return e.term
	}
	if err := e.convert(true); err != nil {
		log.Error("rules: history entry does not convert; recording the call as unparsed", "err", err)
		e.cv, e.nv = ast.NewObject(), ast.NewObject(ast.Item(ast.StringTerm("unparsed"), ast.BooleanTerm(true)))
	}
	e.call, e.norm = nil, nil
	e.term = ast.ObjectTerm(
		ast.Item(ast.StringTerm("call"), ast.NewTerm(e.cv)),
		ast.Item(ast.StringTerm("normalized"), ast.NewTerm(e.nv)),
		ast.Item(ast.StringTerm("flags"), ast.ArrayTerm(e.flags...)),
	)
	return e.term
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
// on later calls, with its final flags and what the judge is shown of it,
// dropping the oldest beyond MaxHistory.
func (ep *EpisodeEval) Record(call, normalized any, flags []Flag, shown Shown) {
	ep.record(&entry{call: call, norm: normalized}, flags, shown)
}

// RecordLast records the call of the latest Eval as Record does, reusing
// the values Eval already converted (a caller that decides one call at a
// time, as the monitor does, saves a conversion per call). It does nothing
// when no call was evaluated since the last record.
func (ep *EpisodeEval) RecordLast(flags []Flag, shown Shown) {
	last := ep.last
	ep.last = nil
	if last == nil {
		return
	}
	ep.record(last, flags, shown)
}

// Recent returns what the judge is shown of the newest n calls in the
// history, oldest first (fewer when fewer are kept; at most MaxHistory).
func (ep *EpisodeEval) Recent(n int) []Shown {
	h := ep.history[max(0, len(ep.history)-n):]
	out := make([]Shown, len(h))
	for i, e := range h {
		out[i] = e.shown
	}
	return out
}

// record appends one history entry.
func (ep *EpisodeEval) record(e *entry, flags []Flag, shown Shown) {
	shown.Rules = nil
	for _, f := range flags {
		shown.Rules = append(shown.Rules, f.Rule)
	}
	e.shown = shown
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
	e.flags = fl
	var disc []*ast.Term
	var cats []string
	for i, f := range flags {
		if ep.eng.discCats[f.Category] {
			disc = append(disc, fl[i])
		}
		cats = append(cats, f.Category)
	}
	changed := len(disc) > 0 // the memo changes only with the discoveries in the window
	if len(ep.history) == MaxHistory {
		changed = changed || len(ep.disc[0]) > 0
		for _, cat := range ep.cats[0] {
			ep.ncat[cat]--
		}
		copy(ep.history, ep.history[1:])
		ep.history = ep.history[:MaxHistory-1]
		copy(ep.disc, ep.disc[1:])
		ep.disc = ep.disc[:MaxHistory-1]
		copy(ep.cats, ep.cats[1:])
		ep.cats = ep.cats[:MaxHistory-1]
	}
	ep.history = append(ep.history, e)
	ep.disc = append(ep.disc, disc)
	ep.cats = append(ep.cats, cats)
	if len(cats) > 0 && ep.ncat == nil {
		ep.ncat = map[string]int{}
	}
	for _, cat := range cats {
		ep.ncat[cat]++
	}
	if changed {
		ep.memo = ep.buildMemo()
	}
}

// buildMemo is input.memo for the current window, what the chained rules
// would otherwise collect by scanning the history on every call: the
// earlier flags in a discovery category, those of them whose evidence is
// specific enough to be recognised when reused, and the rule lists their
// reasons name.
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
	items := make([][2]*ast.Term, len(lists))
	for i, l := range lists {
		items[i] = ast.Item(ast.StringTerm(l.name), l.t)
	}
	return ast.ObjectTerm(items...)
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
	return len(ep.history)
}

// snapshot is the history window as input.history holds it, the memo
// and the provenance, taken together.
func (ep *EpisodeEval) snapshot() ([]*ast.Term, *ast.Term, *ast.Term) {
	var out []*ast.Term
	if ep.eng.readsHistory {
		out = make([]*ast.Term, len(ep.history))
		for i, e := range ep.history {
			out[i] = e.value(ep.eng.log)
		}
	}
	return out, ep.memo, ep.prov
}

// gateHistory is what the gates know of the history window.
func (ep *EpisodeEval) gateHistory() gate.History {
	h := gate.History{Evidence: ep.evid}
	for cat, n := range ep.ncat {
		if n > 0 {
			if h.Categories == nil {
				h.Categories = map[string]bool{}
			}
			h.Categories[cat] = true
		}
	}
	return h
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
	if ep.eng.readsHistory {
		for _, e := range ep.history {
			e.value(ep.eng.log) // converted now, so the two episodes share it unchanged
		}
	}
	c := &EpisodeEval{eng: ep.eng, task: ep.task, sandbox: ep.sandbox, facts: ep.facts, gate: ep.gate,
		// AST terms are never changed once built (record and buildMemo
		// make new ones), so the copies share them.
		history: slices.Clone(ep.history),
		disc:    slices.Clone(ep.disc),
		cats:    slices.Clone(ep.cats),
		ncat:    maps.Clone(ep.ncat),
		memo:    ep.memo, evid: slices.Clone(ep.evid), prov: ep.prov,
	}
	return c
}

// typed is the normalized call as the gates read it when it is the
// monitor's own type; nil otherwise.
func typed(x any) *toolcall.Normalized {
	switch n := x.(type) {
	case toolcall.Normalized:
		return &n
	case *toolcall.Normalized:
		return n
	}
	return nil
}

// typedValue is plain data's normalized call as the gates read it,
// through its JSON; nil when that does not fit (every gate then opens).
func typedValue(v ast.Value) *toolcall.Normalized {
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
