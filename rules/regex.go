package rules

import (
	"encoding/binary"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Literal-anchored regexp search, for Go code that runs a pattern over
// long texts: the regexp clauses of the package gates (prefilter.go) and
// the normalizer's script patterns (Regexp). Most such patterns are
// alternations of words ((?i)(special[- ]?cas\w*…|hard[- ]?cod\w*|…|cheat))
// run over a call's whole script, and most scripts hold no match: Go's
// regexp then walks its NFA or backtracker over every byte (hundreds of
// ns per byte for these patterns). Every match of such a pattern starts
// with one of a small set of literals, so the search can instead find the
// literals' occurrences (in one pass for most of them, litGroup) and try
// the pattern, anchored, at each in order: the first that matches is the leftmost match, and the
// same match regexp.FindString finds, since leftmost-first preference at
// a fixed start is the anchored regexp's own. The anchored pattern is
// matched from the rune before the candidate on (^(?s:.)(?:pattern)), so
// ^, (?m)^ and \b at the start see the text before it, as they do in
// the whole text.
//
// The search is exact or not used: a pattern whose matches may start
// with something other than such a literal set (a leading \w or ., a
// nullable pattern), a set of more than maxLits literals or one that is
// not ASCII keeps regexp's search, and so does a text that holds U+017F
// or U+212A (the two non-ASCII runes that fold to ASCII letters,
// TestFastRegexFolds). The literals are looked for in an ASCII-lowercased
// copy of the text, a superset of what the pattern's case-sensitive parts
// allow; the anchored match on the original text decides.
// TestFastRegexEquivalence compares the search with regexp's on every
// regexp of the policy over the corpus lines, the Rego tests' strings,
// the patterns' own literals and a sample of the real trajectories.
//
// Rego's regex.match and regex.find_n are OPA's own: nothing here
// replaces a builtin (TestNoBuiltinReplaced). Evaluation reaches them
// only for calls whose gates passed, where the search above has already
// run, so a faster builtin bought under 3% of an audit's CPU.

// maxLits bounds the literal set of a pattern; maxLitLen the length the
// literals are extended to; maxBack the runes of any kind a literal may
// follow at the start of a match.
const (
	maxLits   = 64
	maxLitLen = 12
	maxBack   = 4
)

// lit is one literal a match may start with, lowercased; at says where it
// may occur: anywhere, only at the start of the text (^), or at the start
// of a line ((?m)^).
type lit struct {
	s    string
	at   int
	back int    // the match starts this many runes (any) before s
	nl   string // "\n" + s, for litLineStart
}

const (
	litAnywhere = iota
	litTextStart
	litLineStart
)

// fastRe is a pattern's compiled forms; nil lits: not accelerated.
type fastRe struct {
	re       *regexp.Regexp // the pattern; nil when it does not compile
	anchored *regexp.Regexp // ^(?:pattern): a match at the start of the text
	after    *regexp.Regexp // ^(?s:.)(?:pattern): a match after the rune before it
	lits     []lit
	// groups search the literals that may occur anywhere (by back) and
	// those at a line start, each group in one pass over the text;
	// single are the indices in lits of the others (at the start of the
	// text; empty, after back runes), searched one by one
	groups []litGroup
	single []int
	// stop holds the ASCII bytes no match contains (no literal, class or
	// dot of the pattern takes them); any: it holds one. A match tried at
	// c ends before the first stop byte at or after c, so the regexp is
	// given the text up to and including that byte, not the rest of the
	// text: its backtracker clears a bitmap of the program's length times
	// the input's on every attempt. The window is exact: every match at c
	// lies inside it, an assertion where such a match ends (\b, $) sees
	// the stop byte as it would in the whole text, and no match can end at
	// the window's end, where \z and $ would see the end of the text.
	stop [128]bool
	any  bool
	pre  *preCheck // nil: every candidate is tried
}

// matchAt is the end of the match of f that starts at c in s, if any.
// Assertions at c (^, \b) see the text before c: the pattern is matched
// from the rune before c on, which after consumes.
// The regexp sees s up to to (f.stop).
func (f *fastRe) matchAt(s string, c, to int) (int, bool) {
	if c == 0 {
		loc := f.anchored.FindStringIndex(s[:to])
		return end(loc, 0)
	}
	_, k := utf8.DecodeLastRuneInString(s[:c])
	return end(f.after.FindStringIndex(s[c-k:to]), c-k)
}

// stopAfter is the end of the window of a match tried at c: just past the
// first stop byte at or after c, or the end of s.
func (f *fastRe) stopAfter(s string, c int) int {
	if f.any {
		for i := c; i < len(s); i++ {
			if s[i] < utf8.RuneSelf && f.stop[s[i]] {
				return i + 1
			}
		}
	}
	return len(s)
}

// matchBytes marks in may the ASCII bytes a match of re may contain.
func matchBytes(re *syntax.Regexp, may *[128]bool) {
	mark := func(lo, hi rune) {
		for r := max(lo, 0); r <= min(hi, utf8.RuneSelf-1); r++ {
			may[r] = true
		}
	}
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			mark(r, r)
			if re.Flags&syntax.FoldCase != 0 {
				for g := unicode.SimpleFold(r); g != r; g = unicode.SimpleFold(g) {
					mark(g, g)
				}
			}
		}
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			mark(re.Rune[i], re.Rune[i+1])
		}
	case syntax.OpAnyCharNotNL:
		mark(0, '\n'-1)
		mark('\n'+1, utf8.RuneSelf-1)
	case syntax.OpAnyChar:
		mark(0, utf8.RuneSelf-1)
	}
	for _, sub := range re.Sub {
		matchBytes(sub, may)
	}
}

func end(loc []int, off int) (int, bool) {
	if loc == nil {
		return 0, false
	}
	return off + loc[1], true
}

var fastRes sync.Map // pattern → *fastRe

// fastRegexp returns the accelerated form of pat, or nil when regexp's
// own search must run.
func fastRegexp(pat string) *fastRe {
	if f := regexpPlan(pat); f.lits != nil {
		return f
	}
	return nil
}

// regexpPlan is pat's plan, made once per process: accelerated or not,
// with the compiled pattern unless it does not compile.
func regexpPlan(pat string) *fastRe {
	v, ok := fastRes.Load(pat)
	if !ok {
		v, _ = fastRes.LoadOrStore(pat, planRegexp(pat))
	}
	return v.(*fastRe)
}

// matches reports whether the pattern matches s, as regexp's MatchString
// does; f.re must be set.
func (f *fastRe) matches(s string) bool {
	if f.lits != nil && usable(s) {
		return len(f.find(s, 1)) > 0
	}
	return f.re.MatchString(s)
}

func planRegexp(pat string) *fastRe {
	f := &fastRe{}
	re, err := regexp.Compile(pat)
	if err != nil {
		return f // the caller reports it, or OPA does
	}
	f.re = re
	anchored, err1 := regexp.Compile(`^(?:` + pat + `)`)
	after, err2 := regexp.Compile(`^(?s:.)(?:` + pat + `)`)
	if err1 != nil || err2 != nil {
		return f
	}
	tree, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return f
	}
	tree = tree.Simplify()
	if minLen(tree) == 0 {
		return f // empty matches: leave regexp's rules for them to regexp
	}
	ls, _, ok := prefixLits(tree)
	if !ok || len(ls) == 0 || len(ls) > maxLits {
		return f
	}
	for i, l := range ls {
		if l.s == "" && l.at == litAnywhere {
			return f // a match may start anywhere
		}
		ls[i].nl = "\n" + l.s
	}
	f.anchored, f.after, f.lits = anchored, after, ls
	f.pre = newPreCheck(tree)
	f.groups, f.single = groupLits(ls)
	var may [128]bool
	matchBytes(tree, &may)
	for b, m := range may {
		f.stop[b] = !m
		f.any = f.any || !m
	}
	return f
}

// prefixLits is a set of literals one of which every match of re starts
// with. exact: the set is re's whole language, so what follows re in a
// concatenation may extend it. ok false: no such set is known.
func prefixLits(re *syntax.Regexp) (ls []lit, exact, ok bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []lit{{}}, true, true
	case syntax.OpLiteral:
		var b strings.Builder
		for _, r := range re.Rune {
			r, ok := asciiLower(r) // case-sensitive too: the text searched is lowercased
			if !ok {
				return nil, false, false
			}
			b.WriteRune(r)
		}
		return []lit{{s: b.String()}}, true, true
	case syntax.OpCharClass:
		if ls, ok := classLits(re.Rune); ok {
			return ls, true, true
		}
		return []lit{{back: 1}}, true, true // one rune, whichever: s starts after it
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return []lit{{back: 1}}, true, true
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpEndText, syntax.OpEndLine:
		return []lit{{}}, true, true // matchAt checks them where the match starts
	case syntax.OpBeginText:
		return []lit{{at: litTextStart}}, true, true
	case syntax.OpBeginLine:
		return []lit{{at: litLineStart}}, true, true
	case syntax.OpCapture:
		return prefixLits(re.Sub[0])
	case syntax.OpPlus:
		ls, _, ok := prefixLits(re.Sub[0])
		return ls, false, ok
	case syntax.OpStar, syntax.OpQuest:
		ls, exact, ok := prefixLits(re.Sub[0])
		if !ok {
			return nil, false, false
		}
		return append(ls, lit{}), exact && re.Op == syntax.OpQuest, true
	case syntax.OpRepeat:
		ls, _, ok := prefixLits(re.Sub[0])
		if !ok {
			return nil, false, false
		}
		if re.Min == 0 {
			ls = append(ls, lit{})
		}
		return ls, false, true
	case syntax.OpAlternate:
		exact = true
		for _, sub := range re.Sub {
			sl, se, ok := prefixLits(sub)
			if !ok {
				return nil, false, false
			}
			ls, exact = append(ls, sl...), exact && se
		}
		ls = dedupe(ls)
		if len(ls) <= maxLits {
			return ls, exact, true
		}
		ls = shrink(ls)
		return ls, false, len(ls) <= maxLits
	case syntax.OpConcat:
		acc := []lit{{}}
		for i, sub := range re.Sub {
			sl, se, ok := prefixLits(sub)
			if !ok {
				if i == 0 {
					return nil, false, false
				}
				return acc, false, true
			}
			next, fits, cut := cross(acc, sl)
			if !fits {
				return acc, false, true
			}
			acc = next
			if !se || cut {
				return acc, false, true
			}
		}
		return acc, true, true
	}
	return nil, false, false
}

// classLits are the lowercased ASCII runes of a small class, each a
// literal; ok false for a larger class or one with other runes.
func classLits(ranges []rune) (ls []lit, ok bool) {
	seen := map[rune]bool{}
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		if hi-lo > 8 {
			return nil, false
		}
		for r := lo; r <= hi; r++ {
			if r == 0x17F || r == 0x212A {
				continue // never in a text the fast path takes
			}
			l, ok := asciiLower(r)
			if !ok {
				return nil, false
			}
			seen[l] = true
		}
	}
	if len(seen) == 0 || len(seen) > 8 {
		return nil, false
	}
	for r := range seen {
		ls = append(ls, lit{s: string(r)})
	}
	return ls, true
}

// minLen is the length of re's shortest match, in runes.
func minLen(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minLen(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min * minLen(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, sub := range re.Sub {
			n += minLen(sub)
		}
		return n
	case syntax.OpAlternate:
		n := -1
		for _, sub := range re.Sub {
			if m := minLen(sub); n < 0 || m < n {
				n = m
			}
		}
		return max(n, 0)
	}
	return 0 // empty-width, star, quest, no match
}

// cross extends every literal of a by every literal of b; fits is false
// when the result would be too large (a is then kept). A literal longer
// than maxLitLen is cut to that length (cut): what a match starts with
// still, but no longer all of it.
func cross(a, b []lit) (out []lit, fits, cut bool) {
	if len(a)*len(b) > maxLits {
		return nil, false, false
	}
	out = make([]lit, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			if y.at != litAnywhere && (x.s != "" || x.back > 0) {
				return nil, false, false // an anchor after a character: leave it to the regexp
			}
			if y.back > 0 && (x.s != "" || x.at != litAnywhere) {
				return nil, false, false // any rune after a literal or an anchor: the literal ends there
			}
			if x.back+y.back > maxBack {
				return nil, false, false
			}
			at := x.at
			if at == litAnywhere {
				at = y.at
			}
			s := x.s + y.s
			if len(s) > maxLitLen {
				s, cut = s[:maxLitLen], true
			}
			out = append(out, lit{s: s, at: at, back: x.back + y.back})
		}
	}
	return dedupe(out), true, cut
}

// shrink cuts the literals to the longest length at which there are no
// more than maxLits of them (a match still starts with one), or returns
// them as they are when even one byte is too many.
func shrink(ls []lit) []lit {
	for n := maxLitLen - 1; n >= 1; n-- {
		cut := make([]lit, len(ls))
		for i, l := range ls {
			if len(l.s) > n {
				l.s = l.s[:n]
			}
			cut[i] = l
		}
		if cut = dedupe(cut); len(cut) <= maxLits {
			return cut
		}
	}
	return ls
}

func dedupe(ls []lit) []lit {
	seen := make(map[lit]bool, len(ls))
	out := ls[:0]
	for _, l := range ls {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// asciiLower is r lowercased; ok false for non-ASCII.
func asciiLower(r rune) (rune, bool) {
	if r >= utf8.RuneSelf {
		return 0, false
	}
	if 'A' <= r && r <= 'Z' {
		r += 'a' - 'A'
	}
	return r, true
}

// usable reports whether the fast path may search s: no rune in it folds
// to an ASCII letter but the ASCII letters themselves.
func usable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return !strings.Contains(s, "\u017f") && !strings.Contains(s, "\u212a")
		}
	}
	return true
}

// find returns up to n leftmost non-overlapping matches of f in s (all
// when n < 0), as regexp.FindAllString does.
func (f *fastRe) find(s string, n int) []string {
	var out []string
	f.each(s, n, func(c, e int) bool {
		out = append(out, s[c:e])
		return true
	})
	return out
}

// each calls found with the start and end of up to n leftmost
// non-overlapping matches of f in s (all when n < 0), in order, as
// regexp's FindAll functions find them, until found returns false. No
// match is empty (minLen), so each search goes on where the last match
// ended. A candidate the preCheck rules out is not tried.
func (f *fastRe) each(s string, n int, found func(c, e int) bool) {
	if n == 0 {
		return
	}
	cs := f.candidates(lowered(s))
	count := 0
	to := -1 // the window's end for candidates before it (stopAfter)
	for {
		best := cs.least()
		if best < 0 {
			return
		}
		pos := best + 1
		if f.pre != nil && !f.pre.may(s, best) {
			cs.skip(pos)
			continue
		}
		if best >= to {
			to = f.stopAfter(s, best)
		}
		if e, ok := f.matchAt(s, best, to); ok {
			if count++; !found(best, e) || count == n {
				return
			}
			pos = e
		}
		cs.skip(pos)
	}
}

// candidates are where matches of f may start in a lowercased text, in
// order: next[k] is the next at or after a position of f.candidate's k
// (the groups', then the single literals'), -1 for none.
type candidates struct {
	f    *fastRe
	low  string
	next []int
}

// candidates is f's candidates in low from its start.
func (f *fastRe) candidates(low string) candidates {
	cs := candidates{f, low, make([]int, len(f.groups)+len(f.single))}
	for k := range cs.next {
		cs.next[k] = f.candidate(low, k, 0)
	}
	return cs
}

// least is the next candidate, or -1.
func (cs *candidates) least() int {
	best := -1
	for _, c := range cs.next {
		if c >= 0 && (best < 0 || c < best) {
			best = c
		}
	}
	return best
}

// skip moves on to the candidates at or after pos.
func (cs *candidates) skip(pos int) {
	for k, c := range cs.next {
		if c >= 0 && c < pos {
			cs.next[k] = cs.f.candidate(cs.low, k, pos)
		}
	}
}

// candidate is the first position at or after from where a match may
// start at a literal of f.groups[k], or for k past the groups at
// f.lits[f.single[k-len(f.groups)]]; -1 for none.
func (f *fastRe) candidate(low string, k, from int) int {
	if k < len(f.groups) {
		return f.groups[k].candidate(low, from)
	}
	return f.lits[f.single[k-len(f.groups)]].candidate(low, from)
}

// candidate is the first position at or after from where l occurs as it
// may in low, or -1: the search of one literal, which a litGroup does for
// all of its literals at once.
func (l *lit) candidate(low string, from int) int {
	switch l.at {
	case litTextStart:
		if from == 0 && strings.HasPrefix(low, l.s) {
			return 0
		}
		return -1
	case litLineStart:
		if from == 0 && strings.HasPrefix(low, l.s) {
			return 0
		}
		// a line starts after each newline: find "\n"+s with its newline
		// at from-1 or later
		start := max(from, 1) - 1
		if start >= len(low) {
			return -1
		}
		j := strings.Index(low[start:], l.nl)
		if j < 0 {
			return -1
		}
		return start + j + 1
	}
	if from > len(low) {
		return -1
	}
	for q := from; q <= len(low); {
		j := strings.Index(low[q:], l.s)
		if j < 0 {
			return -1
		}
		if c, ok := runesBefore(low, q+j, l.back); ok && c >= from {
			return c
		}
		q += j + 1
	}
	return -1
}

// runesBefore is the offset n runes before p in s; ok false when s has
// fewer before p.
func runesBefore(s string, p, n int) (int, bool) {
	for ; n > 0; n-- {
		if p == 0 {
			return 0, false
		}
		_, k := utf8.DecodeLastRuneInString(s[:p])
		p -= k
	}
	return p, true
}

// lowered is s ASCII-lowercased, remembered for the last few texts: the
// rules run several patterns over each call's text.
func lowered(s string) string {
	if len(s) < 64 {
		return lowerASCII(s)
	}
	key := loweredKey{unsafe.StringData(s), len(s)}
	lowMu.Lock()
	for _, e := range lowCache {
		if e.key == key {
			lowMu.Unlock()
			return e.low
		}
	}
	lowMu.Unlock()
	low := lowerASCII(s)
	lowMu.Lock()
	lowCache[lowNext] = loweredEntry{key, low, s}
	lowNext = (lowNext + 1) % len(lowCache)
	lowMu.Unlock()
	return low
}

// lowerASCII lowercases the ASCII letters of s and keeps every other
// byte where it is, so offsets in the result are offsets in s. It reads
// eight bytes at a time (upperMask); a text without an upper-case ASCII
// letter is returned as it is.
func lowerASCII(s string) string {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if upperMask(loadWord(s[i:])) != 0 {
			break
		}
	}
	for i < len(s) && !('A' <= s[i] && s[i] <= 'Z') {
		i++
	}
	if i == len(s) {
		return s
	}
	i &^= 7
	b := make([]byte, len(s))
	copy(b, s[:i])
	for ; i+8 <= len(s); i += 8 {
		w := loadWord(s[i:])
		binary.LittleEndian.PutUint64(b[i:], w|upperMask(w)>>2)
	}
	for ; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is not written again
}

// upperMask has the high bit of each byte of w that is an ASCII upper-case
// letter set, and no other bit: 'A'-'Z' is 0x41-0x5a, and for a byte b
// below 0x80, b+0x3f reaches 0x80 from 'A' on and b+0x25 from past 'Z' on,
// neither carrying into the next byte. Shifted right by 2 it is the 0x20
// that lowercases each such letter.
func upperMask(w uint64) uint64 {
	const (
		lo7  = 0x7f7f7f7f7f7f7f7f
		high = 0x8080808080808080
		geA  = 0x3f3f3f3f3f3f3f3f // 0x80 - 'A', per byte
		gtZ  = 0x2525252525252525 // 0x80 - 'Z' - 1, per byte
	)
	b := w & lo7
	return ((b + geA) ^ (b + gtZ)) &^ w & high
}

// loadWord is the first eight bytes of s, little-endian.
func loadWord(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

type loweredKey struct {
	p *byte
	n int
}

type loweredEntry struct {
	key loweredKey
	low string
	s   string // keeps the text alive, so its address is not reused
}

var (
	lowMu    sync.Mutex
	lowCache [8]loweredEntry // guarded by lowMu
	lowNext  int             // guarded by lowMu
)

// Regexp is a compiled regular expression for Go code that searches long
// texts, such as the normalizer's patterns over scripts: its searches
// take the literal-anchored path above where that is exact and regexp's
// own otherwise, and find the same matches as regexp.
type Regexp struct {
	re *regexp.Regexp
	f  *fastRe // nil: regexp's search only
}

// MustCompileRegexp compiles pat (Go's RE2 syntax) as regexp.MustCompile
// does, panicking on a bad pattern.
func MustCompileRegexp(pat string) *Regexp {
	r := &Regexp{re: regexp.MustCompile(pat)}
	if f := planRegexp(pat); f.lits != nil {
		r.f = f
	}
	return r
}

// String is the pattern.
func (r *Regexp) String() string { return r.re.String() }

// Accelerated reports whether searches take the literal-anchored path (on
// texts it may search).
func (r *Regexp) Accelerated() bool { return r.f != nil }

// FindAllString is regexp.Regexp.FindAllString.
func (r *Regexp) FindAllString(s string, n int) []string {
	if r.f == nil || !usable(s) {
		return r.re.FindAllString(s, n)
	}
	return r.f.find(s, n)
}

// FindAllStringSubmatch is regexp.Regexp.FindAllStringSubmatch.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	if r.f == nil || !usable(s) {
		return r.re.FindAllStringSubmatch(s, n)
	}
	var out [][]string
	r.f.each(s, n, func(c, _ int) bool {
		// the match at c again, with its groups: after numbers them as the
		// pattern does, (?s:.) and (?:...) capture nothing
		from := 0
		sub := r.f.anchored
		if c > 0 {
			_, k := utf8.DecodeLastRuneInString(s[:c])
			from, sub = c-k, r.f.after
		}
		loc := sub.FindStringSubmatchIndex(s[from:r.f.stopAfter(s, c)])
		m := make([]string, len(loc)/2)
		for i := range m {
			if loc[2*i] >= 0 {
				m[i] = s[from+loc[2*i] : from+loc[2*i+1]]
			}
		}
		if c > 0 {
			m[0] = s[c : from+loc[1]] // group 0 without the rune before
		}
		out = append(out, m)
		return true
	})
	return out
}
