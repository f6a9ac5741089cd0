// Package gate decides, before any Rego runs, which flag rules a tool call
// can trigger at all. A rule declares its gate in its METADATA
// (custom.gate): necessary conditions on the call, written in the terms of
// the input (strings the call holds, command names, git subcommands,
// non-empty lists, the episode's earlier flags and facts). The engine
// evaluates only the rules whose gate is open, and a call that opens none
// is not evaluated at all: most calls of an honest episode.
//
// A gate may open for a call the rule then does not flag, never stay shut
// for one it would: rules.TestGatesSound and monitor.TestPrefilterEquivalence
// hold gated evaluation equal to evaluating every rule over the corpus.
// Anything the gates cannot read safely (base64 in the call, which the
// rules decode; an argv or git op without its list; an episode of an
// unexpected shape) opens every gate.
package gate

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/coregx/ahocorasick"

	"github.com/rollcage/rollcage/toolcall"
)

// Gate is one way a rule can fire: every condition given must hold; each
// list holds when one of its entries does. A rule with several gates runs
// when one of them is open.
type Gate struct {
	// Text: each clause has one of its literals in the call's strings
	// (raw text, content, scripts, paths, argv, hosts, URLs, env, git
	// arguments, and path arguments resolved against the cwd), compared
	// lowercased. Literals are written in lower case.
	Text [][]string
	// Commands: a command of the call has one of these names (and, with
	// Args, such an argument).
	Commands []string
	// Args: an argument of a command (argv after the name; of a command
	// named in Commands, when that is given) matches one of these RE2
	// patterns.
	Args []*regexp.Regexp
	// Git: a git operation has one of these subcommands; "*" is any.
	Git []string
	// Has: one of these parts of the call is non-empty (Parts).
	Has []string
	// After: an earlier call in the history window was flagged in one of
	// these categories.
	After []string
	// Episode: one of these conditions on the episode's facts holds
	// (Conditions).
	Episode []string
	// Match: each of the call's texts named (Texts) has a match of its
	// RE2 pattern. The pattern is the rule's own, run in Go only once the
	// other conditions hold, so a rule whose literals are common words
	// runs only on calls it can flag.
	Match map[string]*Pattern
}

// Pattern is a compiled match pattern.
type Pattern struct {
	re *regexp.Regexp
	m  *matcher
}

// String is the pattern's source.
func (p *Pattern) String() string { return p.re.String() }

// Texts are the texts Match names: "code" is lib.code (content and
// scripts, joined by newlines), "text" lib.text without decoded base64
// (raw text, content and scripts; a call with base64 opens every gate),
// "paths" each path the call reads, lists, writes or deletes and each
// path argument.
var Texts = []string{"code", "text", "paths"}

// Parts are the names Has accepts: a list of the normalized call, "paths"
// (reads, lists, writes, deletes or path arguments), "code" (content or
// scripts) and "all_refs" (a git operation over all refs).
var Parts = []string{"reads", "lists", "writes", "deletes", "paths", "code", "scripts", "env", "hosts", "urls", "packages", "commands", "git", "all_refs"}

// Conditions are the names Episode accepts:
//   - protected: a path of the call may match one of the task's protected
//     paths or canaries (a shell pattern may expand into one), or the
//     call's strings name the literal directory of one;
//   - visible_tests: a written path or a path argument may match a
//     visible-test glob;
//   - future: the call's strings hold the first four hex digits of a
//     commit after the base commit, or the name of a ref after it;
//   - reference: the call's strings hold a reference URL (without its
//     scheme) or the upstream repository's URL;
//   - upstream: the call's strings hold the upstream repository's
//     /owner/name/ path;
//   - evidence: the call's strings hold the evidence of an earlier
//     discovery (a flag of the history window).
var Conditions = []string{"protected", "visible_tests", "future", "reference", "upstream", "evidence"}

// Parse reads a rule's custom.gate METADATA: one gate (an object) or a
// list of them. It is the checker of a rule author's gate: unknown keys,
// parts or conditions, empty lists and literals not in lower case are
// errors that say what to write instead.
func Parse(v any) ([]Gate, error) {
	switch x := v.(type) {
	case map[string]any:
		g, err := parseOne(x)
		if err != nil {
			return nil, fmt.Errorf("gate: %w", err)
		}
		return []Gate{g}, nil
	case []any:
		if len(x) == 0 {
			return nil, errors.New("gate: empty list; give at least one gate or leave gate out (the rule then runs on every call)")
		}
		var out []Gate
		for i, e := range x {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("gate %d: want an object like {text: [word]}, got %T", i, e)
			}
			g, err := parseOne(m)
			if err != nil {
				return nil, fmt.Errorf("gate %d: %w", i, err)
			}
			out = append(out, g)
		}
		return out, nil
	}
	return nil, fmt.Errorf("gate: want an object or a list of objects, got %T", v)
}

func parseOne(m map[string]any) (Gate, error) {
	var g Gate
	if len(m) == 0 {
		return g, errors.New("empty object; give a condition such as text: [word] or leave gate out")
	}
	for k, v := range m {
		var err error
		switch k {
		case "text":
			g.Text, err = clauses(v)
			for _, c := range g.Text {
				for _, l := range c {
					if l != Lower(l) {
						err = fmt.Errorf("literal %q: write it in lower case (%q); the call's strings are compared lowercased", l, Lower(l))
					}
				}
			}
		case "commands":
			g.Commands, err = strs(v)
		case "args":
			var ps []string
			if ps, err = strs(v); err == nil {
				for _, p := range ps {
					re, perr := regexp.Compile(p)
					if perr != nil {
						err = fmt.Errorf("pattern %q: %w", p, perr)
						break
					}
					g.Args = append(g.Args, re)
				}
			}
		case "match":
			g.Match, err = matches(v)
		case "git":
			g.Git, err = strs(v)
		case "has":
			g.Has, err = names(v, Parts)
		case "after":
			g.After, err = strs(v)
		case "episode":
			g.Episode, err = names(v, Conditions)
		default:
			err = fmt.Errorf("unknown key; use text, commands, args, git, has, after, episode or match")
		}
		if err != nil {
			return g, fmt.Errorf("%s: %w", k, err)
		}
	}
	return g, nil
}

// matches reads match: an object of Texts to RE2 patterns.
func matches(v any) (map[string]*Pattern, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return nil, fmt.Errorf("want an object such as {code: PATTERN}, got %v", v)
	}
	out := map[string]*Pattern{}
	for k, p := range m {
		if !slices.Contains(Texts, k) {
			return nil, fmt.Errorf("unknown text %q; use one of %s", k, strings.Join(Texts, ", "))
		}
		ps, ok := p.(string)
		if !ok || ps == "" {
			return nil, fmt.Errorf("%s: want a pattern, got %v", k, p)
		}
		re, err := regexp.Compile(ps)
		if err != nil {
			return nil, fmt.Errorf("%s: pattern %q: %w", k, ps, err)
		}
		out[k] = &Pattern{re: re, m: newMatcher(re)}
	}
	return out, nil
}

// clauses reads text: a list of literals (one clause) or a list of lists.
func clauses(v any) ([][]string, error) {
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return nil, fmt.Errorf("want a non-empty list of literals, got %v", v)
	}
	if _, nested := l[0].([]any); !nested {
		c, err := strs(v)
		return [][]string{c}, err
	}
	var out [][]string
	for _, e := range l {
		c, err := strs(e)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func strs(v any) ([]string, error) {
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return nil, fmt.Errorf("want a non-empty list of strings, got %v", v)
	}
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, ok := e.(string)
		if !ok || s == "" {
			return nil, fmt.Errorf("want non-empty strings, got %v (%T)", e, e)
		}
		out = append(out, s)
	}
	return out, nil
}

func names(v any, known []string) ([]string, error) {
	out, err := strs(v)
	for _, n := range out {
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("unknown name %q; use one of %s", n, strings.Join(known, ", "))
		}
	}
	return out, err
}

// Rule is one flag rule's gates; nil Gates: the rule runs on every call.
type Rule struct {
	ID    string
	Gates []Gate
}

// Set holds the gates of a policy's rules, compiled once.
type Set struct {
	rules []Rule
	text  [][][][]int            // per rule, per gate, its Text clauses as literal indices
	lits  []string               // the Text literals, in the matcher's pattern order
	ac    *ahocorasick.Automaton // nil: no literals
}

// New compiles the rules' gates.
func New(rules []Rule) (*Set, error) {
	s := &Set{rules: rules, text: make([][][][]int, len(rules))}
	index := map[string]int{}
	for i, r := range rules {
		for _, g := range r.Gates {
			var cls [][]int
			for _, c := range g.Text {
				var cl []int
				for _, l := range c {
					j, ok := index[l]
					if !ok {
						j = len(s.lits)
						index[l] = j
						s.lits = append(s.lits, l)
					}
					cl = append(cl, j)
				}
				cls = append(cls, cl)
			}
			s.text[i] = append(s.text[i], cls)
		}
	}
	if len(s.lits) > 0 {
		ac, err := ahocorasick.NewBuilder().AddStrings(s.lits).Build()
		if err != nil {
			return nil, fmt.Errorf("gate: literals: %w", err)
		}
		s.ac = ac
	}
	return s, nil
}

// Rules is the number of rules in the set.
func (s *Set) Rules() int { return len(s.rules) }

// EpisodeFacts is what the gates know of the episode a call belongs to.
type EpisodeFacts struct {
	// Unknown: the facts had an unexpected shape; every gate opens.
	Unknown bool
	// Workdir and Home resolve relative and ~ path arguments.
	Workdir, Home string
	// Protected are the protected globs and canaries (absolute);
	// ProtectedText the literals whose presence in the call's strings
	// names a protected directory (lowercased).
	Protected     []string
	ProtectedText []string
	// Visible are the visible-test globs (absolute).
	Visible []string
	// Future are literals of the commits and refs after the base commit
	// (first four hex digits, ref names), lowercased.
	Future []string
	// Reference are literals of the reference URLs and the upstream,
	// lowercased.
	Reference []string
	// Upstream is the upstream's /owner/name/ path, lowercased, when it
	// has one.
	Upstream []string

	once        sync.Once
	protG, visG []globLit // Protected and Visible, read once
}

// globLit is what every string a glob matches holds (globLiterals).
type globLit struct {
	prefix string
	runs   []string
}

func (ep *EpisodeFacts) globs() (prot, vis []globLit) {
	ep.once.Do(func() {
		for _, g := range ep.Protected {
			ep.protG = append(ep.protG, globLiterals(g))
		}
		for _, g := range ep.Visible {
			ep.visG = append(ep.visG, globLiterals(g))
		}
	})
	return ep.protG, ep.visG
}

// History is what the gates know of the episode's earlier calls.
type History struct {
	// Categories of the flags in the history window.
	Categories map[string]bool
	// Evidence of the discoveries a later call may reuse, lowercased.
	Evidence []string
}

// Result is what the gates made of one call.
type Result struct {
	// Open says, per rule of the set (in the order New was given them),
	// whether the call can trigger it.
	Open []bool
	// ArgPaths are the call's path arguments resolved as lib.arg_paths
	// resolves them, which the engine passes on (input.derived).
	ArgPaths []string
}

// Open reads one call: which rules it can trigger. A nil Result means
// every rule: the gates could not read the call (the package doc says
// when).
func (s *Set) Open(n *toolcall.Normalized, ep *EpisodeFacts, h History) *Result {
	if n == nil || ep == nil || ep.Unknown {
		return nil
	}
	c, ok := newCall(n, ep)
	if !ok {
		return nil
	}
	if strings.Contains(c.hay, "base64") {
		return nil // the rules decode base64 payloads into their text
	}
	if s.ac != nil {
		c.found = make([]bool, len(s.lits))
		for _, m := range s.ac.FindAllOverlapping([]byte(c.hay)) {
			c.found[m.PatternID] = true
		}
	}
	open := make([]bool, len(s.rules))
	for i, r := range s.rules {
		if r.Gates == nil {
			open[i] = true
			continue
		}
		for j, g := range r.Gates {
			if s.holds(g, s.text[i][j], c, ep, h) {
				open[i] = true
				break
			}
		}
	}
	return &Result{Open: open, ArgPaths: c.argPaths}
}

func (s *Set) holds(g Gate, text [][]int, c *call, ep *EpisodeFacts, h History) bool {
	for _, cl := range text {
		if !slices.ContainsFunc(cl, func(l int) bool { return c.found[l] }) {
			return false
		}
	}
	if g.Commands != nil || g.Args != nil {
		if !slices.ContainsFunc(c.n.Commands, func(x toolcall.Command) bool {
			return (g.Commands == nil || slices.Contains(g.Commands, x.Name)) && (g.Args == nil || argStarts(x, g.Args))
		}) {
			return false
		}
	}
	if g.Git != nil && !slices.ContainsFunc(c.n.Git, func(op toolcall.GitOp) bool {
		return slices.Contains(g.Git, "*") || slices.Contains(g.Git, op.Sub)
	}) {
		return false
	}
	if g.Has != nil && !slices.ContainsFunc(g.Has, c.has) {
		return false
	}
	if g.After != nil && !slices.ContainsFunc(g.After, func(cat string) bool { return h.Categories[cat] }) {
		return false
	}
	if g.Episode != nil && !slices.ContainsFunc(g.Episode, func(cond string) bool { return c.episode(cond, ep, h) }) {
		return false
	}
	for t, re := range g.Match { // last: the dearest test
		if !c.match(t, re) {
			return false
		}
	}
	return true
}

// call is one normalized call as the gates read it.
type call struct {
	n        *toolcall.Normalized
	hay      string   // every string of the call, lowercased, one per line
	argPaths []string // path arguments resolved (lib.arg_paths)
	pyArgs   []string // .py arguments resolved (test_tampering.rel_args)
	found    []bool   // per literal of the set: in hay
	code     *folds   // lib.code, once joined
	text     *folds   // lib.text, once joined
}

func newCall(n *toolcall.Normalized, ep *EpisodeFacts) (*call, bool) {
	c := &call{n: n}
	var b strings.Builder
	add := func(ss ...string) {
		for _, s := range ss {
			b.WriteString(s)
			b.WriteByte('\n')
		}
	}
	add(n.Raw, n.Content, n.OldContent, n.Cwd)
	add(n.Scripts...)
	add(n.Reads...)
	add(n.Lists...)
	add(n.Writes...)
	add(n.Deletes...)
	add(n.Packages...)
	add(n.Hosts...)
	add(n.URLs...)
	for k, v := range n.Env {
		add(k, v)
	}
	for _, op := range n.Git {
		if op.Args == nil {
			return nil, false // the rules may fail on a null list: fail closed
		}
		add(op.Sub)
		add(op.Args...)
		add(op.Flags...)
		add(op.Refs...)
	}
	cwd := n.Cwd
	if cwd == "" {
		cwd = ep.Workdir
	}
	for _, cmd := range n.Commands {
		if cmd.Argv == nil {
			return nil, false
		}
		add(cmd.Name)
		add(cmd.Argv...)
		for i, a := range cmd.Argv {
			if i == 0 || strings.HasPrefix(a, "-") {
				continue
			}
			if strings.Contains(a, "/") && !strings.Contains(a, "://") {
				p := abs(a, cwd, ep.Home)
				c.argPaths = append(c.argPaths, p)
				add(p)
			} else if strings.HasSuffix(a, ".py") {
				p := abs(a, cwd, ep.Home)
				c.pyArgs = append(c.pyArgs, p)
				add(p)
			}
		}
	}
	c.hay = Lower(b.String())
	return c, true
}

// Lower is s as the gates look for literals in it: lowercased as Rego's
// lower() does, and the long s as s, which a (?i) regexp folds to it.
// Literals and episode strings are lowered the same way.
func Lower(s string) string {
	l := strings.ToLower(s)
	if strings.Contains(l, "ſ") {
		l = strings.ReplaceAll(l, "ſ", "s")
	}
	return l
}

// foldRegexp maps s to what a (?i) regexp sees in it over ASCII: ASCII
// letters lowercased, the long s and the Kelvin sign as s and k (they
// fold to them); every other rune as it is (matcher).
func foldRegexp(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'A' <= r && r <= 'Z':
			return r + 'a' - 'A'
		case r == 'ſ':
			return 's'
		case r == 'K':
			return 'k'
		}
		return r
	}, s)
}

// abs is lib.abs: p resolved against the cwd, ~ against home.
func abs(p, cwd, home string) string {
	switch {
	case strings.HasPrefix(p, "/"):
		return p
	case strings.HasPrefix(p, "~"):
		return home + p[1:]
	}
	return cwd + "/" + strings.TrimPrefix(p, "./")
}

// argStarts: an argument of cmd (after its name) matches one of res.
func argStarts(cmd toolcall.Command, res []*regexp.Regexp) bool {
	for _, a := range cmd.Argv[min(1, len(cmd.Argv)):] {
		for _, re := range res {
			if re.MatchString(a) {
				return true
			}
		}
	}
	return false
}

// match: the call's text t (Texts) has a match of p.
func (c *call) match(t string, p *Pattern) bool {
	n := c.n
	switch t {
	case "code":
		if c.code == nil {
			c.code = &folds{s: strings.Join(append([]string{n.Content}, n.Scripts...), "\n")}
		}
		return p.m.match(c.code.s, c.code.folded)
	case "text":
		if c.text == nil {
			c.text = &folds{s: strings.Join(append([]string{n.Raw, n.Content}, n.Scripts...), "\n")}
		}
		return p.m.match(c.text.s, c.text.folded)
	case "paths":
		for _, l := range [][]string{n.Reads, n.Lists, n.Writes, n.Deletes, c.argPaths} {
			for _, s := range l {
				f := folds{s: s}
				if p.m.match(s, f.folded) {
					return true
				}
			}
		}
		return false
	}
	return true
}

// folds is a text and, once made, its folded form.
type folds struct {
	s, f string
	done bool
}

func (f *folds) folded() string {
	if !f.done {
		f.f, f.done = foldRegexp(f.s), true
	}
	return f.f
}

func (c *call) has(part string) bool {
	n := c.n
	switch part {
	case "reads":
		return len(n.Reads) > 0
	case "lists":
		return len(n.Lists) > 0
	case "writes":
		return len(n.Writes) > 0
	case "deletes":
		return len(n.Deletes) > 0
	case "paths":
		return len(n.Reads)+len(n.Lists)+len(n.Writes)+len(n.Deletes)+len(c.argPaths) > 0
	case "code":
		return n.Content != "" || len(n.Scripts) > 0
	case "scripts":
		return len(n.Scripts) > 0
	case "env":
		return len(n.Env) > 0
	case "hosts":
		return len(n.Hosts) > 0
	case "urls":
		return len(n.URLs) > 0
	case "packages":
		return len(n.Packages) > 0
	case "commands":
		return len(n.Commands) > 0
	case "git":
		return len(n.Git) > 0
	case "all_refs":
		return slices.ContainsFunc(n.Git, func(op toolcall.GitOp) bool { return op.AllRefs })
	}
	return true // Parse admits no other name
}

func (c *call) episode(cond string, ep *EpisodeFacts, h History) bool {
	switch cond {
	case "protected":
		prot, _ := ep.globs()
		return c.contains(ep.ProtectedText) || c.pathNear(prot, nil)
	case "visible_tests":
		_, vis := ep.globs()
		return c.pathNear(vis, c.pyArgs)
	case "future":
		return c.contains(ep.Future)
	case "reference":
		return c.contains(ep.Reference)
	case "upstream":
		return c.contains(ep.Upstream)
	case "evidence":
		return c.contains(h.Evidence)
	}
	return true
}

func (c *call) contains(lits []string) bool {
	return slices.ContainsFunc(lits, func(l string) bool { return strings.Contains(c.hay, l) })
}

// pathNear: a path of the call could match one of globs, itself or as
// the directory holding a match (lib.protected tests p and p+"/x"), or,
// when it is a shell pattern, expand into one.
func (c *call) pathNear(globs []globLit, more []string) bool {
	if len(globs) == 0 {
		return false
	}
	near := func(p string) bool {
		q := p + "/x" // a match of g, p or p+"/x", leaves q holding g's literal parts
		lit, pattern := p, false
		if i := strings.IndexAny(p, "*?["); i >= 0 {
			lit, pattern = p[:i], true
		}
		for _, g := range globs {
			if strings.HasPrefix(q, g.prefix) && !slices.ContainsFunc(g.runs, func(r string) bool { return !strings.Contains(q, r) }) {
				return true
			}
			// a shell pattern may expand to anything that starts with its
			// literal part (protected.pattern)
			if pattern && (strings.HasPrefix(g.prefix, lit) || strings.HasPrefix(lit, g.prefix)) {
				return true
			}
		}
		return false
	}
	n := c.n
	for _, l := range [][]string{n.Reads, n.Lists, n.Writes, n.Deletes, c.argPaths, more} {
		if slices.ContainsFunc(l, near) {
			return true
		}
	}
	return false
}

// globLiterals is what every string glob g matches holds: its literal
// prefix and, for a glob without classes or alternatives, every literal
// run between its wildcards.
func globLiterals(g string) globLit {
	prefix := g
	if i := strings.IndexAny(g, "*?[{\\"); i >= 0 {
		prefix = g[:i]
	}
	var runs []string
	if !strings.ContainsAny(g, "[{\\") {
		runs = strings.FieldsFunc(g, func(c rune) bool { return c == '*' || c == '?' })
	}
	return globLit{prefix, runs}
}
