package rules

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Rule-level gating. The prefilter skips whole packages; inside the
// packages that run on every call (their rules read the free text of any
// call), most rules still cannot fire on a given call, and OPA charges a
// microsecond or two per rule body it enters. So Go computes, per call, a
// small object input.feat of booleans — each a necessary condition of some
// rules: "the call writes code", "the text contains /proc", "a search
// command has an argument outside the workspace" — and each such rule
// starts with `input.feat.<name> == true`. OPA's rule indexer reads those
// equalities off input before evaluating anything, so a rule whose feature
// is false costs nothing.
//
// A feature may be true when its rules then find nothing, never false when
// one of them would fire: keywords are literal substrings that every match
// of the rules' regexps contains, looked for in the lowercased haystack of
// every string of the call (a superset of lib.text and lib.code). Anything
// unexpected — facts of an odd shape, an input field of the wrong type,
// base64 in the call (decoded payloads join lib.text) — makes every feature
// true. TestPrefilterEquivalence holds gated evaluation equal to ungated
// evaluation on every corpus line.
//
// A package whose every flag rule starts with such a test is skipped whole
// when none of its features is on (prefilter.go), and a call that opens
// nothing is not evaluated. The chained rules' features also read the
// episode: the evidence of the discoveries in the history window.
//
// Inputs without input.feat match no gated rule; Engine.Eval, an EpisodeEval
// with Config.DisablePrefilter, and the Rego fixture therefore supply
// every feature true (lib.all_features).

// feature is one input.feat entry.
type feature struct {
	name string
	on   func(*scan) bool
}

// The structural tests some features add to their derived gates: lists
// of command and subcommand names that sit at a fixed place in argv.
var (
	gitLog     = set("log", "rev-list", "whatchanged", "shortlog")
	gitListing = set("reflog", "for-each-ref", "show-ref", "ls-remote", "fsck", "lost-found", "count-objects", "verify-pack", "unpack-objects", "show-branch", "branch", "tag", "cat-file")
	remoteRefs = []string{"origin", "upstream", "refs/remotes", "remotes", "refs/tags", "refs/pull", "FETCH_HEAD", "ORIG_HEAD"}

	cmdSearch  = set("find", "locate", "mlocate", "plocate", "fd", "fdfind", "grep", "rg", "ag", "ls", "tree", "du")
	cmdPytest  = set("pytest", "py.test", "tox", "nox")
	sweepRoots = set("/", "/opt", "/srv", "/mnt", "/var", "/data", "/root", "/home", "/media", "/usr/local/share", "/etc")

	runnerBin = regexp.MustCompile(`/(s?bin|\.local/bin|scripts)/(pytest|py\.test|python3?(\.\d+)?|tox|nox)$`)
)

// features are the entries of input.feat. lib.feature_names must list the
// same names (TestFeatureNames).
var features = []feature{
	// protected_access
	{"prot_path", func(s *scan) bool { return s.pathNear(s.g.protGlobs) }},
	{"prot_text", nil},
	{"kw_grader", nil},
	{"search_root", func(s *scan) bool { return s.searchRoot() }},
	{"cmd_locate", nil},
	{"search_name", nil},
	{"sweep", func(s *scan) bool { return s.sweep() }},
	{"code_walk", nil},
	// test_tampering
	{"vis_write", func(s *scan) bool { return s.writeNear(s.g.visGlobs) }},
	{"mutating", func(s *scan) bool { return s.mutating() }},
	{"has_deletes", nil},
	{"conftest_write", nil},
	{"code_outcome", nil},
	{"code_pytest_hook", nil},
	{"cfg_write", nil},
	{"has_env", nil},
	{"kw_pytest_env", nil},
	{"code_collect_ignore", nil},
	{"deselect", func(s *scan) bool { return s.deselect() }},
	{"code_skip_exit", nil},
	{"kw_forged", nil},
	{"runner_path", func(s *scan) bool { return s.runnerPath() }},
	{"kw_alias", nil},
	{"script_test_write", nil},
	// evaluator_manipulation
	{"kw_startup", nil},
	{"kw_preload", nil},
	{"code_global_patch", nil},
	{"kw_faketime", nil},
	{"code_framework", nil},
	{"kw_site", nil},
	{"code_sys_path", nil},
	// environment_probing
	{"kw_proc", nil},
	{"cmd_ps", nil},
	{"kw_runtime", nil},
	{"kw_rollcage", nil},
	{"kw_sandbox", nil},
	{"cmd_sandbox", nil},
	{"code_introspect", nil},
	// history_mining (evaluated only when the call mentions git)
	{"git_future", func(s *scan) bool { return s.gitFuture() }},
	{"kw_commit", nil},
	{"kw_ref", nil},
	{"git_all", func(s *scan) bool { return s.gitAny(func(op gitop) bool { return op.allRefs }) }},
	{"kw_all_refs", nil},
	{"git_pickaxe", func(s *scan) bool { return s.gitAny(pickaxe) }},
	{"git_refs", func(s *scan) bool { return s.gitAny(refListing) }},
	{"git_remote", nil},
	{"kw_git_internals", nil},
	{"git_upstream", nil},
	// special_casing (evaluated only when the call carries code)
	{"code_return", nil},
	{"code_lookup", nil},
	{"code_always", nil},
	{"code_comment", nil},
	{"code_test_detect", nil},
	// network_fetch (evaluated only when the call may reach the network)
	{"net_urls", nil},
	{"net_hosts", nil},
	{"kw_reference", nil},
	{"kw_code_host", nil},
	{"cmd_pip", nil},
	// chained_discovery (evaluated only when the history holds discoveries)
	{"outside_path", func(s *scan) bool {
		return slices.ContainsFunc(s.readsLists, func(p string) bool { return !s.g.inWorkdir(p) })
	}},
	{"git_ref_named", func(s *scan) bool { return s.gitAny(func(op gitop) bool { return len(op.refs) > 0 }) }},
	{"workdir_write", func(s *scan) bool { return slices.ContainsFunc(s.writes, s.g.inWorkdir) }},
	{"patch_cmd", nil},
	{"evidence_seen", func(s *scan) bool { return containsAny(s.text(), s.evidence) }},
}

func set(xs ...string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

var (
	featKeys = func() []*ast.Term {
		if len(features) > 64 {
			panic("rules: more than 64 features do not fit the feature bits")
		}
		ks := make([]*ast.Term, len(features))
		for i, f := range features {
			ks[i] = ast.StringTerm(f.name)
		}
		return ks
	}()
	featIndex = func() map[string]int {
		m := make(map[string]int, len(features))
		for i, f := range features {
			m[f.name] = i
		}
		return m
	}()
	// allFeatBits has every feature on.
	allFeatBits = uint64(1)<<len(features) - 1
	// allFeatures is input.feat for ungated evaluation.
	allFeatures = featObject(allFeatBits)

	// featTerms caches input.feat by feature bits: a run sees few distinct
	// combinations, and building the object costs more than the lookup.
	featTerms   sync.Map // uint64 → *ast.Term
	featTermsN  atomic.Int64
	maxFeatTerm = int64(1 << 14)
)

// featureBit is the bit of the named feature, 0 for an unknown name.
func featureBit(name string) uint64 {
	if i, ok := featIndex[name]; ok {
		return 1 << i
	}
	return 0
}

// featBits computes which of the features in need are on for a scan; nil
// scan means all. A feature is on when one of the rules it gates passes
// its derived gate in gs (when gs has them) and its structural test, if
// it has one, holds: each is a necessary condition of those rules.
func (gs *gateSet) featBits(s *scan, need uint64) uint64 {
	if s == nil {
		return allFeatBits
	}
	var b uint64
	for i, f := range features {
		if need&(1<<i) == 0 {
			continue
		}
		if gs.feat[i] != nil && !slices.ContainsFunc(gs.feat[i], func(g [][]int) bool { return allClauses(g, s.found) }) {
			continue
		}
		if f.on == nil || f.on(s) {
			b |= 1 << i
		}
	}
	return b
}

// feat is input.feat for the given feature bits.
func feat(bits uint64) *ast.Term {
	if t, ok := featTerms.Load(bits); ok {
		return t.(*ast.Term)
	}
	t := featObject(bits)
	if featTermsN.Load() < maxFeatTerm {
		if _, loaded := featTerms.LoadOrStore(bits, t); !loaded {
			featTermsN.Add(1)
		}
	}
	return t
}

func featObject(bits uint64) *ast.Term {
	items := make([][2]*ast.Term, len(features))
	for i := range features {
		items[i] = [2]*ast.Term{featKeys[i], ast.InternedTerm(bits&(1<<i) != 0)}
	}
	return ast.ObjectTerm(items...)
}

// derived is input.derived: what lib.text, lib.code, lib.touched and
// lib.arg_paths compute, for a call without base64 (lib.decoded is empty).
func (s *scan) derived() *ast.Term {
	return ast.ObjectTerm(
		ast.Item(ast.InternedTerm("text"), ast.StringTerm(s.callText(callTextAll))),
		ast.Item(ast.InternedTerm("code"), ast.StringTerm(s.callText(callTextCode))),
		ast.Item(ast.InternedTerm("touched"), stringSet(s.touched)),
		ast.Item(ast.InternedTerm("arg_paths"), stringSet(s.argPaths)),
	)
}

// The texts of a call the regexp clauses search (derive.go's alt.text).
const (
	callTextRaw  = "raw"  // input.normalized.raw
	callTextAll  = "text" // input.derived.text
	callTextCode = "code" // input.derived.code
)

// callText is a text of the call as the rules get it. The joins are made
// once: the regexp gates and input.derived share them.
func (s *scan) callText(name string) string {
	switch name {
	case callTextRaw:
		return s.raw
	case callTextAll:
		if !s.joined {
			s.join()
		}
		return s.textAll
	case callTextCode:
		if !s.joined {
			s.join()
		}
		return s.codeAll
	}
	panic("rules: no call text " + name)
}

func (s *scan) join() {
	s.textAll = strings.Join(append([]string{s.raw, s.content}, s.scriptList...), "\n")
	s.codeAll = strings.Join(append([]string{s.content}, s.scriptList...), "\n")
	s.joined = true
}

func stringSet(xs []string) *ast.Term {
	ts := make([]*ast.Term, len(xs))
	for i, x := range xs {
		ts[i] = ast.StringTerm(x)
	}
	return ast.SetTerm(ts...)
}

// command is one entry of normalized.commands.
type command struct {
	name string
	argv []string
}

// gitop is one entry of normalized.git.
type gitop struct {
	sub               string
	args, flags, refs []string
	allRefs           bool
}

// scan is what the gates read from one normalized call.
type scan struct {
	g             *gates
	hay           []string // every string of the call and the resolved argv paths, and the markers
	lower         string   // hay lowercased, each string followed by a newline; made on first use (text)
	found         found    // the keywords and the gates' literals in lower
	code          bool     // content or scripts: lib.code is not empty
	scripts       bool
	env           bool
	netty         bool
	gitops        bool
	raw, content  string
	nHosts, nURLs int
	pip           bool // a pip-like command (network_fetch.pip)
	scriptList    []string
	touched       []string // reads, lists, writes, deletes
	readsLists    []string
	evidence      []string // lowercased evidence of the discoveries in the history window
	argPaths      []string // lib.arg_paths
	writes        []string
	deletes       []string
	cmds          []command
	git           []gitop
	cwdv          string // normalized.cwd
	// textAll and codeAll are input.derived's text and code, once joined
	textAll, codeAll string
	joined           bool
}

// has: the haystack contains one of the keywords. Keywords of the table
// are looked up in the set found in the scan's one pass; others (the
// episode's needles) are searched for.
func (s *scan) has(kws ...string) bool {
	for _, k := range kws {
		if b := keywords.bit(k); b >= 0 {
			if s.found.has(b) {
				return true
			}
		} else if strings.Contains(s.text(), k) {
			return true
		}
	}
	return false
}

// text is the haystack: every string of hay lowercased, each followed by
// a newline. The gates' literals are found without it (gateSet.find);
// only searches for other strings make it.
func (s *scan) text() string {
	if s.lower == "" && len(s.hay) > 0 {
		var b strings.Builder
		for _, x := range s.hay {
			b.WriteString(x)
			b.WriteByte('\n')
		}
		s.lower = foldASCII(b.String())
	}
	return s.lower
}

// keywords are the literals Go itself looks for, beside the derived gates'
// (TestKeywordTable holds this list to the s.has calls): base64, which
// opens every gate.
var keywords = newMultiMatcher([]string{"base64"})

// pathNear: a touched or argv path could match a glob, itself or as the
// directory holding a match (lib.protected tests p and p+"/x").
func (s *scan) pathNear(globs []globNeed) bool {
	near := func(p string) bool {
		q := p + "/x"
		lit, pattern := p, false
		if i := strings.IndexAny(p, "*?["); i >= 0 {
			lit, pattern = p[:i], true
		}
		for _, g := range globs {
			if g.may(q) { // implied by g.may(p)
				return true
			}
			// a shell pattern may expand to anything that starts with
			// its literal part (protected.pattern)
			if pattern && (strings.HasPrefix(g.prefix, lit) || strings.HasPrefix(lit, g.prefix)) {
				return true
			}
		}
		return false
	}
	for _, p := range s.touched {
		if near(p) {
			return true
		}
	}
	for _, p := range s.argPaths {
		if near(p) {
			return true
		}
	}
	return false
}

func (s *scan) writeNear(globs []globNeed) bool {
	for _, p := range s.writes {
		for _, g := range globs {
			if g.may(p) {
				return true
			}
		}
	}
	return false
}

// rootArgs are protected.search_roots: argv words from / ~ or .., resolved.
func (s *scan) rootArgs(c command, fn func(string) bool) bool {
	for i, a := range c.argv {
		if i == 0 {
			continue
		}
		if strings.HasPrefix(a, "/") || strings.HasPrefix(a, "~") || strings.HasPrefix(a, "..") {
			if fn(s.abs(a)) {
				return true
			}
		}
	}
	return false
}

func (s *scan) searchRoot() bool {
	for _, c := range s.cmds {
		if cmdSearch[c.name] && s.rootArgs(c, func(string) bool { return true }) {
			return true
		}
	}
	return false
}

func (s *scan) sweep() bool {
	for _, c := range s.cmds {
		if s.rootArgs(c, func(r string) bool {
			if sweepRoots[r] {
				return true
			}
			for _, p := range []string{"/opt/", "/srv/", "/mnt/", "/data/", "/media/"} {
				if strings.HasPrefix(r, p) {
					return true
				}
			}
			return false
		}) {
			return true
		}
	}
	return false
}

// mutating is test_tampering.mutating(c) for some command.
func (s *scan) mutating() bool {
	for _, c := range s.cmds {
		switch c.name {
		case "truncate", "touch", "patch", "ex", "ed":
			return true
		case "sed", "perl":
			for _, a := range c.argv {
				if inPlaceFlag(a) {
					return true
				}
			}
		case "git":
			for _, a := range c.argv {
				switch a {
				case "rm", "mv", "checkout", "restore", "apply":
					return true
				}
			}
		}
	}
	return false
}

// deselect: a pytest run with an argument test_tampering.deselect_arg
// could accept.
func (s *scan) deselect() bool {
	for _, c := range s.cmds {
		run := cmdPytest[c.name]
		if !run && (c.name == "python" || c.name == "python3") {
			for _, a := range c.argv {
				if a == "pytest" || a == "unittest" {
					run = true
				}
			}
		}
		if !run {
			continue
		}
		for _, a := range c.argv {
			if strings.HasPrefix(a, "--deselect") || strings.HasPrefix(a, "--ignore") || strings.HasPrefix(a, "--continue-on-collection-errors") ||
				strings.HasPrefix(a, "--runxfail") || a == "-p" || strings.HasPrefix(a, "-k") {
				return true
			}
		}
	}
	return false
}

func (s *scan) runnerPath() bool {
	for _, p := range s.writes {
		if runnerBin.MatchString(p) {
			return true
		}
	}
	for _, p := range s.argPaths {
		if runnerBin.MatchString(p) {
			return true
		}
	}
	return false
}

// abs is lib.abs.
func (s *scan) abs(p string) string {
	switch {
	case strings.HasPrefix(p, "/"):
		return p
	case strings.HasPrefix(p, "~"):
		return s.g.home + p[1:]
	}
	return s.cwd() + "/" + strings.TrimPrefix(p, "./")
}

func (s *scan) cwd() string {
	if s.cwdv != "" {
		return s.cwdv
	}
	return s.g.workdir
}

// inPlaceFlag matches ^-[a-zA-Z]*i.
func inPlaceFlag(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	for i := 1; i < len(a); i++ {
		c := a[i]
		if c == 'i' {
			return true
		}
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return false
}

// foldASCII lowercases s the way a (?i) regexp matches it: the long s and
// the Kelvin sign fold to ASCII letters too.
func foldASCII(s string) string {
	l := strings.ToLower(s)
	if strings.Contains(l, "ſ") {
		l = strings.ReplaceAll(l, "ſ", "s")
	}
	return l
}

func (s *scan) gitAny(fn func(gitop) bool) bool {
	for _, op := range s.git {
		if fn(op) {
			return true
		}
	}
	return false
}

// gitFuture: a git argument or ref could name a non-ancestor commit (it
// holds the first four hex digits of one) or ref (it holds the name).
func (s *scan) gitFuture() bool {
	return s.gitAny(func(op gitop) bool {
		for _, l := range [][]string{op.args, op.refs} {
			for _, a := range l {
				la := strings.ToLower(a)
				if containsAny(la, s.g.commit4) {
					return true
				}
				for _, r := range s.g.refs {
					if strings.Contains(a, r) {
						return true
					}
				}
			}
		}
		return false
	})
}

// pickaxe is history.pickaxe's condition on one op.
func pickaxe(op gitop) bool {
	if !gitLog[op.sub] {
		return false
	}
	for _, l := range [][]string{op.flags, op.args} {
		for _, f := range l {
			for _, p := range []string{"-S", "-G", "--grep", "--pickaxe", "--all-match", "--find-object"} {
				if strings.HasPrefix(f, p) {
					return true
				}
			}
		}
	}
	return false
}

func refListing(op gitop) bool {
	if gitListing[op.sub] || op.sub == "describe" { // describe --contains: history.descendants
		return true
	}
	for _, r := range op.refs {
		for _, p := range remoteRefs {
			if strings.HasPrefix(r, p) {
				return true
			}
		}
	}
	return false
}
