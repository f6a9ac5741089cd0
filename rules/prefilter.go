package rules

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/rollcage/rollcage/toolcall"
)

// The prefilter is the hot path's answer to "most rule packages cannot fire
// on most calls": every rule is interpreted, and even a rule whose first
// expression fails costs about a microsecond, so evaluating all of them for
// `ls -la` dominates the monitor's overhead. Before evaluating, an EpisodeEval
// computes in Go which default packages a call could possibly trigger and
// evaluates one query that names only those packages. A package whose
// every flag rule starts with a feature test (see feat.go) runs only when
// one of its features is on, so a call that turns on no feature and opens
// no gate (`ls`, `cat src/x.py`, `pytest -q`) is not evaluated at all. User
// packages (from Config.PolicyDirs) always run.
//
// The gates are deliberately coarse and one-sided: a gate may let a package
// run that then finds nothing, never the reverse. They read a haystack of
// every string the call carries (raw text, content, scripts, paths, argv,
// hosts, URLs, cwd), lowercased, which is a superset of lib.text. Base64 in
// the call, or an input field of an unexpected type, opens every gate, so
// decoded payloads and evaluation errors (fail closed) reach the rules as
// before. TestPrefilterEquivalence holds the filtered result equal to the
// full evaluation on every corpus line.

// pkgGate says when one package runs: when some rule's derived gate is
// open (gateSet.open) and, for a package whose every flag rule starts with
// `input.feat.<name> == true`, when one of those features is on (feats 0:
// whatever the features). A call for which no package runs is not
// evaluated at all.
type pkgGate struct {
	name  string
	feats uint64
	uses  uint64    // every feature the package's rules read
	term  *ast.Term // name, for input.run
}

func allClauses(cs [][]int, f found) bool {
	for _, c := range cs {
		if !slices.ContainsFunc(c, f.has) {
			return false
		}
	}
	return true
}

// prefilter holds one lazily prepared query per set of packages to run.
type prefilter struct {
	pkgs   []pkgGate // gated packages (default ones, and user ones whose every rule has a derived gate), sorted by name; at most 64
	user   []string  // user packages without a gate: they run on every call, sorted
	always uint64    // features read outside the gated packages (all, with user packages)
	prep   func(q string) (rego.PreparedEvalQuery, error)
	// hasUser: the policy has packages of its own; then episodes pass the
	// full input (call and history), which user rules may read
	hasUser bool
	static  *gateSet  // the gates derived from the policy alone
	plan    *gatePlan // how static was read, for deriving episodes' gates

	userTerms []*ast.Term // user as terms, for input.run

	once sync.Once // prepares q
	q    rego.PreparedEvalQuery
	err  error

	mu   sync.Mutex
	sets map[string]*gateSet // guarded by mu; episodes' gates by gatePlan.episode's key
}

// newPrefilter plans per-package evaluation, or returns nil when the policy
// is not the default layout (the aggregator replaced or extended, the
// default bundle off): then every call runs the aggregated FlagsQuery.
func newPrefilter(c *ast.Compiler, docs map[string]any, defaults map[string]bool, prep func(string) (rego.PreparedEvalQuery, error)) *prefilter {
	rulesRef := ast.MustParseRef("data.rollcage.rules")
	aggRef := ast.MustParseRef("data.rollcage")
	userPkg := map[string]bool{}
	defPkg := map[string]bool{}
	for name, m := range c.Modules {
		path := m.Package.Path
		if path.Equal(aggRef) && !defaults[name] {
			return nil // someone else contributes to data.rollcage.flags
		}
		if len(path) < 4 || !path.HasPrefix(rulesRef) {
			continue
		}
		s, ok := path[3].Value.(ast.String)
		if !ok {
			return nil
		}
		if defaults[name] {
			defPkg[string(s)] = true
		} else {
			userPkg[string(s)] = true
		}
	}
	if len(defPkg) == 0 || len(defPkg)+len(userPkg) > 64 {
		return nil
	}
	if r, ok := docs["rollcage"].(map[string]any); ok {
		if rr, ok := r["rules"].(map[string]any); ok {
			for k := range rr {
				userPkg[k] = true // data documents under rollcage.rules
			}
		}
	}
	pf := &prefilter{prep: prep, hasUser: len(userPkg) > 0, plan: newGatePlan(c, nil, nil)}
	dg := pf.plan.gates()
	gates := dg.byPkg
	for p := range defPkg {
		if userPkg[p] {
			continue // a user module extends it: it runs on every call, ungated
		}
		pf.pkgs = append(pf.pkgs, pkgGate{name: p, feats: featureGates(c, p)})
	}
	for p := range userPkg {
		if g, ok := gates[p]; ok && g != nil && !defPkg[p] && !docPkg(docs, p) {
			pf.pkgs = append(pf.pkgs, pkgGate{name: p, feats: featureGates(c, p)})
			continue
		}
		pf.user = append(pf.user, p)
	}
	// which features each package reads; features read elsewhere (lib, a
	// user package) are always computed
	uses := map[string]uint64{}
	for _, m := range c.Modules {
		pkg := ""
		if path := m.Package.Path; len(path) >= 4 && path.HasPrefix(rulesRef) {
			if s, ok := path[3].Value.(ast.String); ok {
				pkg = string(s)
			}
		}
		ast.WalkRefs(m, func(r ast.Ref) bool {
			if len(r) < 2 || !r[0].Equal(ast.InputRootDocument) || !r[1].Equal(ast.InternedTerm("feat")) {
				return false
			}
			bits := allFeatBits // input.feat as a whole, or a computed key
			if len(r) >= 3 {
				if name, ok := r[2].Value.(ast.String); ok {
					bits = featureBit(string(name))
				}
			}
			uses[pkg] |= bits
			return false
		})
	}
	for i, p := range pf.pkgs {
		pf.pkgs[i].uses = uses[p.name]
		delete(uses, p.name)
	}
	for _, bits := range uses {
		pf.always |= bits
	}
	if len(pf.user) > 0 {
		pf.always = allFeatBits
	}
	slices.SortFunc(pf.pkgs, func(a, b pkgGate) int { return strings.Compare(a.name, b.name) })
	sort.Strings(pf.user)
	for i := range pf.pkgs {
		pf.pkgs[i].term = ast.StringTerm(pf.pkgs[i].name)
	}
	for _, u := range pf.user {
		pf.userTerms = append(pf.userTerms, ast.StringTerm(u))
	}
	pf.static = pf.gateSet(dg, nil)
	return pf
}

// episodeGateSet is the gates of an episode with these facts and task:
// the rules that read them derived again, their new literals matched by a
// matcher of their own next to the policy's.
// Episodes whose gates come from the same sources share one gateSet.
func (pf *prefilter) episodeGateSet(facts, task *ast.Term) *gateSet {
	plan, key := pf.plan.episode(facts, task)
	if key != "" {
		pf.mu.Lock()
		gs := pf.sets[key]
		pf.mu.Unlock()
		if gs != nil {
			return gs
		}
	}
	gs := pf.gateSet(plan.gates(), pf.static.match)
	if key != "" {
		pf.mu.Lock()
		if pf.sets == nil || len(pf.sets) >= maxGateSets {
			pf.sets = map[string]*gateSet{}
		}
		pf.sets[key] = gs
		pf.mu.Unlock()
	}
	return gs
}

// maxGateSets bounds prefilter.sets; it starts over when full.
const maxGateSets = 256

// gateSet is a set of derived gates as bits of its own matcher: the
// policy's alone (prefilter.static), or an episode's, derived with its
// facts and task.
type gateSet struct {
	// match finds the feature keywords and the derived gates' literals
	// in one pass; its first literals are keywords'. extra, when not nil,
	// finds an episode's literals match does not know; their bits follow
	// match's.
	match, extra *multiMatcher
	// derived: per package of prefilter.pkgs, one conjunction of clauses
	// per flag rule, as bits of match; nil when some rule has none (the
	// package runs whatever the text)
	derived [][][][]int
	// byID: per rule id, each flag rule's derived gate (nil: none), for
	// tests that check the gates against what fires
	byID         map[string][][][]int // id → rules → clauses → literal bits
	rules, gated int
	// feat: per feature, the gates of the rules it gates (nil: the
	// feature is not derived, see featBits)
	feat [][][][]int
	// regex are the regexp clauses' literals (regexLit), whose bits follow
	// the matchers'; withRegex, every gate above that holds one, its
	// clauses with regexp bits last (resolve)
	regex     []regexGate
	regexBit  map[string]int // by literal, an index of regex
	regexBase int
	withRegex [][][]int
}

// regexGate is one regexp clause: the call text it searches and the
// pattern's plan (regexpPlan; regexLit took only patterns that compile).
type regexGate struct {
	text string
	re   *fastRe
}

// gateSet builds the bits of dg's gates: on a matcher of their own
// (base nil), or on base and a matcher of the literals base does not know.
func (pf *prefilter) gateSet(dg derivedGates, base *multiMatcher) *gateSet {
	gs := &gateSet{match: base, rules: dg.rules, gated: dg.gated}
	var lits []string // the literals the matchers look for
	regexBit := map[string]int{}
	for _, l := range dg.lits {
		text, pat, ok := parseRegexLit(l)
		if !ok {
			lits = append(lits, l)
			continue
		}
		if _, seen := regexBit[l]; !seen {
			regexBit[l] = len(gs.regex)
			gs.regex = append(gs.regex, regexGate{text: text, re: regexpPlan(pat)})
		}
	}
	if base == nil {
		gs.match = newMultiMatcher(slices.Concat(keywords.lits, lits))
	} else if extra := slices.DeleteFunc(lits, func(l string) bool { return base.bit(l) >= 0 }); len(extra) > 0 {
		gs.extra = newMultiMatcher(extra)
	}
	gs.regexBase = len(gs.match.lits)
	if gs.extra != nil {
		gs.regexBase += len(gs.extra.lits)
	}
	gs.regexBit = regexBit
	conj := func(g []clause) [][]int {
		out := make([][]int, 0, len(g))
		for _, cl := range g {
			var b []int
			for _, l := range cl {
				b = append(b, gs.bit(l))
			}
			out = append(out, b)
		}
		return out
	}
	for _, p := range pf.pkgs {
		var d [][][]int
		if rs := dg.byPkg[p.name]; rs != nil {
			for _, r := range rs {
				d = append(d, conj(r))
			}
		}
		gs.derived = append(gs.derived, d)
	}
	gs.feat = make([][][][]int, len(features))
	for i, rs := range dg.byFeat {
		for _, r := range rs {
			gs.feat[i] = append(gs.feat[i], conj(r))
		}
	}
	if len(gs.regex) > 0 {
		seen := map[string]bool{} // a rule's gate is its package's and its feature's
		for _, rs := range slices.Concat(gs.derived, gs.feat) {
			for _, r := range rs {
				if k := fmt.Sprint(r); slices.ContainsFunc(r, gs.hasRegex) && !seen[k] {
					seen[k] = true
					// the clauses without a regexp first: they decide most gates
					r = slices.Clone(r)
					slices.SortStableFunc(r, func(a, b []int) int { return cmpBool(gs.hasRegex(a), gs.hasRegex(b)) })
					gs.withRegex = append(gs.withRegex, r)
				}
			}
		}
	}
	gs.byID = make(map[string][][][]int, len(dg.byID))
	for id, rs := range dg.byID {
		for _, g := range rs {
			var b [][]int // nil: no gate
			if g != nil {
				b = conj(g)
			}
			gs.byID[id] = append(gs.byID[id], b)
		}
	}
	return gs
}

// bit is a literal's bit, -1 when the gates do not know it.
func (gs *gateSet) bit(lit string) int {
	if j, ok := gs.regexBit[lit]; ok {
		return gs.regexBase + j
	}
	if i := gs.match.bit(lit); i >= 0 || gs.extra == nil {
		return i
	}
	if i := gs.extra.bit(lit); i >= 0 {
		return len(gs.match.lits) + i
	}
	return -1
}

// find reports which of the gates' literals the haystack of the strings
// hay contains (scan.lower: each lowercased, followed by a newline).
// It reads the strings in place, through the matchers' folding, rather
// than the haystack made: foldASCII maps a text rune by rune, and a
// newline is a rune of its own that no rune's decoding reads into, so
// foldASCII(a+"\n"+b) is foldASCII(a)+"\n"+foldASCII(b) and the bytes the
// matchers read are the haystack's, in order. When the literals allow
// (multiMatcher.nlLast), a long string already read is not read again.
func (gs *gateSet) find(hay []string) found {
	n := gs.regexBase + len(gs.regex)
	f := make(found, (n+63)/64)
	var skip uint64
	if gs.match.nlLast && (gs.extra == nil || gs.extra.nlLast) {
		skip = repeats(hay)
	}
	p := gs.match.newPass()
	if x := gs.extra; x != nil {
		q := x.newPass()
		if !feedHayPair(&p, &q, hay, skip) {
			p.feedHay(hay, skip)
			q.feedHay(hay, skip)
		}
		q.into(f, len(gs.match.lits))
	} else {
		p.feedHay(hay, skip)
	}
	p.into(f, 0)
	return f
}

// hasRegex reports whether clause c holds a regexp clause's bit.
func (gs *gateSet) hasRegex(c []int) bool {
	return slices.ContainsFunc(c, func(b int) bool { return b >= gs.regexBase })
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// resolve sets in f the bits of the regexp clauses that match the call's
// texts (scan.callText), running a pattern only for a gate whose other
// clauses hold, each at most once. A bit left clear is then either a
// pattern that does not match or one that no gate needed: every gate
// holding it failed on another clause, so it is closed either way, and
// each gate reads the same from f as it would with every pattern run.
func (gs *gateSet) resolve(f found, sc *scan) {
	if len(gs.regex) == 0 || f == nil {
		return
	}
	var buf [1]uint64 // the patterns run, by bit: the policy's 35 fit
	tried := found(buf[:])
	if len(gs.regex) > 64 {
		tried = make(found, (len(gs.regex)+63)/64)
	}
	for _, g := range gs.withRegex {
		for _, c := range g {
			if !gs.satisfied(c, f, tried, sc) {
				break // the gate is closed
			}
		}
	}
}

// satisfied reports whether clause c holds, running its patterns not
// yet tried while no literal of it is found.
func (gs *gateSet) satisfied(c []int, f found, tried found, sc *scan) bool {
	if slices.ContainsFunc(c, f.has) {
		return true
	}
	for _, b := range c {
		j := b - gs.regexBase
		if j < 0 || tried.has(j) {
			continue
		}
		tried[j/64] |= 1 << (j % 64)
		if rg := &gs.regex[j]; rg.re.matches(sc.callText(rg.text)) {
			f[b/64] |= 1 << (b % 64)
			return true
		}
	}
	return false
}

// repeats is the set, by index in hay (the first 64), of the strings of
// minRepeat bytes or more that an earlier one equals (among the first
// maxRepeats such strings). A call's script is often one of its argv as
// well (python -c), and long: repeats were 7% of the real corpus'
// haystack bytes.
func repeats(hay []string) (skip uint64) {
	const minRepeat, maxRepeats = 16, 16
	var long [maxRepeats]string // the long strings kept
	n := 0
	for i, s := range hay[:min(len(hay), 64)] {
		if len(s) < minRepeat {
			continue
		}
		if slices.Contains(long[:n], s) {
			skip |= 1 << i
		} else if n < len(long) {
			long[n] = s
			n++
		}
	}
	return skip
}

// open reports whether some rule of package i passes its derived gate for
// the keywords found.
func (gs *gateSet) open(i int, f found) bool {
	d := gs.derived[i]
	if d == nil || f == nil {
		return true
	}
	for _, rule := range d {
		if allClauses(rule, f) {
			return true
		}
	}
	return false
}

// featureGates is the set of features one of which every flag rule of
// package pkg needs, read off the rules' first expressions; 0 when a rule
// does not start with such a test (the package then runs whatever the
// features).
func featureGates(c *ast.Compiler, pkg string) uint64 {
	ref := ast.MustParseRef("data.rollcage.rules").Append(ast.StringTerm(pkg)).Append(ast.StringTerm("flag"))
	rs := c.GetRulesWithPrefix(ref)
	if len(rs) == 0 {
		return 0
	}
	var bits uint64
	for _, r := range rs {
		b := featureTest(r)
		if b == 0 {
			return 0
		}
		bits |= b
	}
	return bits
}

// featureTest is the bit of the feature r's body starts by testing
// (`input.feat.<name> == true`), or 0.
func featureTest(r *ast.Rule) uint64 {
	if r.Else != nil || len(r.Body) == 0 {
		return 0
	}
	e := r.Body[0]
	if e.Negated || len(e.With) > 0 || !e.IsCall() || len(e.Operands()) != 2 {
		return 0
	}
	if op := e.Operator(); !op.Equal(ast.Equality.Ref()) && !op.Equal(ast.Equal.Ref()) {
		return 0
	}
	a, b := e.Operands()[0], e.Operands()[1]
	if _, ok := a.Value.(ast.Ref); !ok {
		a, b = b, a
	}
	ref, ok := a.Value.(ast.Ref)
	if !ok || !b.Equal(ast.BooleanTerm(true)) || len(ref) != 3 || !ref[0].Equal(ast.InputRootDocument) || !ref[1].Equal(ast.StringTerm("feat")) {
		return 0
	}
	name, ok := ref[2].Value.(ast.String)
	if !ok {
		return 0
	}
	return featureBit(string(name))
}

// needed is the features worth computing for a call whose gate literals
// found are f (nil: all) with gates gs: those the packages whose derived
// gates are open read. The others cannot matter: no rule that reads them
// runs.
func (pf *prefilter) needed(gs *gateSet, f found) uint64 {
	need := pf.always
	for i, p := range pf.pkgs {
		if gs.open(i, f) {
			need |= p.uses
		}
	}
	return need
}

// packages is the set of gated packages to run for a call with features
// fbits and, unless it is nil (gate nothing), the keywords found by the
// policy's own matcher.
func (pf *prefilter) packages(fbits uint64, f found) uint64 {
	return pf.packagesWith(pf.static, fbits, f)
}

// packagesWith is packages with the derived gates gs (an episode's).
func (pf *prefilter) packagesWith(gs *gateSet, fbits uint64, f found) uint64 {
	var set uint64
	for i, p := range pf.pkgs {
		if p.feats != 0 && fbits&p.feats == 0 {
			continue
		}
		if !gs.open(i, f) {
			continue
		}
		set |= 1 << i
	}
	return set
}

// empty reports whether set runs no package at all: nothing can fire.
func (pf *prefilter) empty(set uint64) bool { return set == 0 && len(pf.user) == 0 }

// runQuery evaluates the flags of the packages input.run names: one
// query for every package set, so no set costs a compile of its own (the
// real corpus needs dozens of distinct sets). Each package's flags come
// through the comprehension, so an undefined package is empty.
const runQuery = `{f | some name in input.run; some f in data.rollcage.rules[name].flag}`

// query returns the prepared query of every package set, preparing it on
// first use.
func (pf *prefilter) query() (rego.PreparedEvalQuery, error) {
	pf.once.Do(func() {
		pf.q, pf.err = pf.prep(runQuery)
		if pf.err != nil {
			pf.err = fmt.Errorf("rules: prepare %s: %w", runQuery, asCompileError(pf.err))
		}
	})
	return pf.q, pf.err
}

// run is the input.run of a package set: the names of its packages and
// of the user packages, which run on every call.
func (pf *prefilter) run(set uint64) *ast.Term {
	names := make([]*ast.Term, 0, len(pf.userTerms)+bits.OnesCount64(set))
	names = append(names, pf.userTerms...)
	for i := range pf.pkgs {
		if set&(1<<i) != 0 {
			names = append(names, pf.pkgs[i].term)
		}
	}
	return ast.ArrayTerm(names...)
}

// gates are the per-episode facts the gates compare a call with.
type gates struct {
	allOpen bool // facts or task of an unexpected shape: gate nothing

	workdir, home string
	workdirSlash  string
	protGlobs     []globNeed // what a path matching a protected glob contains
	protNeedles   []string   // protected glob stems as protected.text looks for them, lowercased
	visGlobs      []globNeed // what a path matching a visible-test glob contains
	commit4       []string   // lowercase 4-hex prefixes of non-ancestor commits
	refs          []string   // non-ancestor ref names as the sandbox gave them
}

func newGates(task, facts *ast.Term) gates {
	var g gates
	if facts == nil {
		g.allOpen = true
		return g
	}
	if fo, ok := facts.Value.(ast.Object); ok {
		if c7 := fo.Get(ast.InternedTerm("commit7")); c7 != nil {
			if !forEachString(c7.Value, func(string) {}) {
				g.allOpen = true
			}
		}
		str := func(k string) string {
			t := fo.Get(ast.InternedTerm(k))
			if t == nil {
				g.allOpen = true
				return ""
			}
			s, ok := t.Value.(ast.String)
			if !ok {
				g.allOpen = true
			}
			return string(s)
		}
		g.workdir, g.home = str("workdir"), str("home")
		g.workdirSlash = str("workdir_slash")
		wdSlash := g.workdirSlash
		globs := func(k string, fn func(string)) {
			t := fo.Get(ast.InternedTerm(k))
			if t == nil || !forEachString(t.Value, fn) {
				g.allOpen = true
			}
		}
		globs("protected_globs", func(gl string) {
			g.protGlobs = append(g.protGlobs, newGlobNeed(gl))
			// protected.text: the stem when it has two segments, its part
			// under the workdir when strictly inside
			stem := strings.TrimRight(globLiteral(gl, "*?[{"), "/")
			if len(strings.Split(strings.Trim(stem, "/"), "/")) >= 2 {
				g.protNeedles = append(g.protNeedles, foldASCII(stem))
			}
			if r := strings.TrimPrefix(stem, wdSlash); strings.HasPrefix(stem, wdSlash) && strings.Contains(r, "/") {
				g.protNeedles = append(g.protNeedles, foldASCII(r))
			}
		})
		globs("visible_globs", func(gl string) { g.visGlobs = append(g.visGlobs, newGlobNeed(gl)) })
		globs("commits", func(c string) {
			if len(c) >= 4 {
				g.commit4 = append(g.commit4, strings.ToLower(c[:4]))
			}
		})
		globs("refs", func(r string) { g.refs = append(g.refs, r) })
	} else {
		g.allOpen = true
	}
	to, ok := task.Value.(ast.Object)
	if !ok {
		g.allOpen = true
		return g
	}
	if r := to.Get(ast.InternedTerm("reference_urls")); r != nil && !forEachString(r.Value, func(string) {}) {
		g.allOpen = true
	}
	if u := to.Get(ast.InternedTerm("upstream_repo")); u != nil {
		if _, ok := u.Value.(ast.String); !ok {
			g.allOpen = true
		}
	}
	return g
}

// inWorkdir is lib.in_workdir.
func (g *gates) inWorkdir(p string) bool {
	return strings.HasPrefix(p, g.workdirSlash) || p == g.workdir
}

// globNeed is what every string a glob matches contains: its literal
// prefix and, for globs without classes or alternatives, every literal run
// between wildcards.
type globNeed struct {
	prefix string
	runs   []string
}

func newGlobNeed(g string) globNeed {
	n := globNeed{prefix: globLiteral(g, "*?[{\\")}
	if !strings.ContainsAny(g, "[{\\") {
		n.runs = strings.FieldsFunc(g, func(c rune) bool { return c == '*' || c == '?' })
	}
	return n
}

// may reports whether the glob could match s.
func (n globNeed) may(s string) bool {
	if !strings.HasPrefix(s, n.prefix) {
		return false
	}
	for _, r := range n.runs {
		if !strings.Contains(s, r) {
			return false
		}
	}
	return true
}

// globLiteral is the part of a glob before its first special character.
func globLiteral(g, special string) string {
	if i := strings.IndexAny(g, special); i >= 0 {
		return g[:i]
	}
	return g
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

var pipNames = map[string]bool{"pip": true, "pip3": true, "uv": true, "pipx": true, "poetry": true, "conda": true, "python": true, "python3": true}

// scan reads one normalized call, and the markers of the episode's memo,
// for the gates, typed; nil means gate
// nothing (facts of an unexpected shape, a call that is not a
// toolcall.Normalized, a null list the rules may fail on, or base64 in
// the call).
func (g *gates) scan(n *toolcall.Normalized, gs *gateSet, marks ...string) *scan {
	if g.allOpen || n == nil {
		return nil
	}
	sc := &scan{g: g, hay: make([]string, 0, 32)}
	add := func(s string) { sc.hay = append(sc.hay, s) }
	addAll := func(l []string) { sc.hay = append(sc.hay, l...) }
	sc.raw, sc.content, sc.cwdv = n.Raw, n.Content, n.Cwd
	add(n.Raw)
	add(n.Content)
	add(n.OldContent)
	add(n.Cwd)
	sc.scriptList = n.Scripts
	addAll(n.Scripts)
	sc.scripts = len(n.Scripts) > 0
	addAll(marks) // the episode's memo
	sc.code = sc.scripts || sc.content != ""
	if sc.code {
		add(marker("code")) // lib.code is not empty
	}
	sc.readsLists = slices.Concat(n.Reads, n.Lists)
	sc.writes, sc.deletes = n.Writes, n.Deletes
	sc.touched = slices.Concat(sc.readsLists, sc.writes, sc.deletes)
	for _, l := range [][]string{sc.touched, n.Packages, n.Hosts, n.URLs} {
		addAll(l)
	}
	sc.nHosts, sc.nURLs = len(n.Hosts), len(n.URLs)
	// the markers of the lists that are not empty (derive.go's inputVal)
	for _, l := range []struct {
		name string
		n    int
	}{{"scripts", len(n.Scripts)}, {"reads", len(n.Reads)}, {"lists", len(n.Lists)}, {"writes", len(n.Writes)},
		{"deletes", len(n.Deletes)}, {"packages", len(n.Packages)}, {"hosts", len(n.Hosts)}, {"urls", len(n.URLs)},
		{"touched", len(sc.touched)}, {"commands", len(n.Commands)}, {"git", len(n.Git)}, {"env", len(n.Env)}} {
		if l.n > 0 {
			add(marker(l.name))
		}
	}
	sc.netty = sc.nHosts+sc.nURLs > 0
	if len(n.Env) > 0 {
		sc.env = true
		for k, v := range n.Env {
			add(k)
			add(v)
		}
	}
	for _, op := range n.Git {
		if op.Args == nil {
			return nil // null args: the rules may fail on them (fail closed)
		}
		sc.gitops = true
		sc.git = append(sc.git, gitop{sub: op.Sub, args: op.Args, flags: op.Flags, refs: op.Refs, allRefs: op.AllRefs})
		add(op.Sub)
		addAll(op.Args)
		addAll(op.Flags)
		addAll(op.Refs)
	}
	for _, c := range n.Commands {
		if c.Argv == nil {
			return nil // as above
		}
		cmd := command{name: c.Name, argv: c.Argv}
		add(c.Name)
		addAll(c.Argv)
		// network_fetch.pip(c): python counts only with "pip" in argv
		if pipNames[cmd.name] && (cmd.name != "python" && cmd.name != "python3" || slices.Contains(cmd.argv, "pip")) {
			sc.netty, sc.pip = true, true
		}
		sc.cmds = append(sc.cmds, cmd)
	}
	// lib.arg_paths, resolved as the rules resolve them.
	for _, c := range sc.cmds {
		for i, a := range c.argv {
			if i > 0 && !strings.HasPrefix(a, "-") && strings.Contains(a, "/") && !strings.Contains(a, "://") {
				p := sc.abs(a)
				sc.argPaths = append(sc.argPaths, p)
				add(p)
			}
		}
	}
	if len(sc.argPaths) > 0 {
		add(marker("arg_paths"))
	}
	sc.found = gs.find(sc.hay)
	if sc.has("base64") {
		return nil // decoded payloads join lib.text
	}
	gs.resolve(sc.found, sc)
	return sc
}

func containsAny(s string, needles []string) bool {
	for _, n := range needles {
		if n != "" && strings.Contains(s, n) {
			return true
		}
	}
	return false
}

// discoveryCats reads the categories the chained rules follow up on, so
// the memo Go keeps matches the policy. Nil when there is no such package.
func discoveryCats(ctx context.Context, prep func(string) (rego.PreparedEvalQuery, error)) map[string]bool {
	q, err := prep("data.rollcage.rules.chained_discovery.discovery_cats")
	if err != nil {
		return nil
	}
	rs, err := q.Eval(ctx)
	if err != nil || len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil
	}
	list, ok := rs[0].Expressions[0].Value.([]any)
	if !ok {
		return nil
	}
	out := map[string]bool{}
	for _, x := range list {
		if s, ok := x.(string); ok {
			out[s] = true
		}
	}
	return out
}

// docPkg: data documents (not rules) sit under rollcage.rules.<p>; such a
// package is not gated.
func docPkg(docs map[string]any, p string) bool {
	r, _ := docs["rollcage"].(map[string]any)
	rr, _ := r["rules"].(map[string]any)
	_, ok := rr[p]
	return ok
}
