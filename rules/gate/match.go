package gate

import (
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A matcher answers whether a pattern matches a text at all, as
// regexp.MatchString does, faster on long texts. Go's regexp skips to
// the occurrences of a pattern's literal prefix with strings.Index, but
// only for a case-sensitive pattern that starts with one literal; the
// rules' patterns are mostly alternations of words, often under (?i), so
// regexp would step its machine over every byte of a long script. A
// pattern matches when one of its top-level alternatives does, so each
// is compiled alone, and one that is case-insensitive throughout (over
// ASCII) is compiled case-sensitive, lowercased, and run on the text
// folded (foldRegexp), which it matches exactly when the
// original alternative matches the text. Each then has a literal prefix
// where its words allow. TestMatcher holds the result equal to
// regexp.MatchString on every pattern of the policy.
type matcher struct {
	alts []alt
}

type alt struct {
	re     *regexp.Regexp
	folded bool     // run on the folded text
	need   []string // one of these is in every text the alternative matches (nil: none known)
}

// newMatcher plans pattern re; it keeps re itself when the pattern does
// not split.
func newMatcher(re *regexp.Regexp) *matcher {
	m := &matcher{alts: []alt{{re: re}}}
	tree, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return m
	}
	tree = tree.Simplify()
	for tree.Op == syntax.OpCapture {
		tree = tree.Sub[0]
	}
	subs := []*syntax.Regexp{tree}
	if tree.Op == syntax.OpAlternate {
		subs = tree.Sub
	}
	subs = expand(subs)
	var alts []alt
	for _, sub := range subs {
		a := alt{folded: foldable(sub)}
		if a.folded {
			sub = lowered(sub)
		}
		a.need = required(sub)
		r, err := regexp.Compile(source(sub))
		if err != nil {
			return m
		}
		a.re = r
		alts = append(alts, a)
	}
	m.alts = alts
	return m
}

// match reports whether the pattern matches s; folded is foldRegexp(s), made
// on first use.
func (m *matcher) match(s string, folded func() string) bool {
	for _, a := range m.alts {
		t := s
		if a.folded {
			t = folded()
		}
		if a.need != nil && !containsAny(t, a.need) {
			continue
		}
		if a.re.MatchString(t) {
			return true
		}
	}
	return false
}

// foldable: every literal and class of re that holds an ASCII letter
// holds it in both cases (re is case-insensitive throughout, over ASCII),
// and re holds no other non-ASCII literal than fold leaves alone. On a
// folded text (ASCII lowercased, ſ and K as s and k) such a pattern
// matches exactly when, lowercased, it does.
func foldable(re *syntax.Regexp) bool {
	letters := false
	var ok func(*syntax.Regexp) bool
	ok = func(re *syntax.Regexp) bool {
		switch re.Op {
		case syntax.OpLiteral:
			for _, r := range re.Rune {
				if r >= utf8.RuneSelf {
					return false
				}
				if isLetter(r) {
					letters = true
					if re.Flags&syntax.FoldCase == 0 {
						return false
					}
				}
			}
		case syntax.OpCharClass:
			for c := 'a'; c <= 'z'; c++ {
				if inClass(re.Rune, c) != inClass(re.Rune, c-'a'+'A') {
					return false
				}
				letters = letters || inClass(re.Rune, c)
			}
			// a non-ASCII rune that folds to an ASCII letter
			if inClass(re.Rune, 'ſ') != inClass(re.Rune, 's') || inClass(re.Rune, 'K') != inClass(re.Rune, 'k') {
				return false
			}
		}
		for _, sub := range re.Sub {
			if !ok(sub) {
				return false
			}
		}
		return true
	}
	return ok(re) && letters
}

func isLetter(r rune) bool { return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' }

func inClass(ranges []rune, r rune) bool {
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i] <= r && r <= ranges[i+1] {
			return true
		}
	}
	return false
}

// lowered is re with its literals lowercased and case-sensitive; classes
// are left as they are (foldable: they hold both cases).
func lowered(re *syntax.Regexp) *syntax.Regexp {
	c := *re
	c.Flags &^= syntax.FoldCase
	if c.Op == syntax.OpLiteral {
		c.Rune = []rune(strings.ToLower(string(re.Rune)))
	}
	c.Sub = make([]*syntax.Regexp, len(re.Sub))
	for i, sub := range re.Sub {
		c.Sub[i] = lowered(sub)
	}
	return &c
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// maxAlts bounds the alternatives expand makes of a pattern.
const maxAlts = 32

// expand splits each alternative that starts with an alternation (A|B)C
// into AC and BC, which match what it matches, so each may start with a
// literal of its own; alternatives stay as they are beyond maxAlts.
func expand(subs []*syntax.Regexp) []*syntax.Regexp {
	var out []*syntax.Regexp
	for _, sub := range subs {
		if sub.Op != syntax.OpConcat || len(sub.Sub) < 2 {
			out = append(out, sub)
			continue
		}
		first := sub.Sub[0]
		for first.Op == syntax.OpCapture {
			first = first.Sub[0]
		}
		if first.Op != syntax.OpAlternate || len(out)+len(first.Sub)+len(subs) > maxAlts {
			out = append(out, sub)
			continue
		}
		for _, b := range first.Sub {
			c := &syntax.Regexp{Op: syntax.OpConcat, Flags: sub.Flags}
			c.Sub = append([]*syntax.Regexp{b}, sub.Sub[1:]...)
			out = append(out, c)
		}
	}
	return out
}

// required is a set of literals one of which every match of re holds, as
// re's own literals are written (case-sensitive: lowered made them so);
// nil when none is known.
func required(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil
		}
		return []string{string(re.Rune)}
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min > 0 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		var best []string
		for _, sub := range re.Sub {
			if r := required(sub); r != nil && (best == nil || shortest(r) > shortest(best)) {
				best = r
			}
		}
		return best
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			r := required(sub)
			if r == nil {
				return nil
			}
			all = append(all, r...)
		}
		return all
	}
	return nil
}

func shortest(ls []string) int {
	n := -1
	for _, l := range ls {
		if n < 0 || len(l) < n {
			n = len(l)
		}
	}
	return n
}

// source is re as a pattern. syntax.Regexp.String works out which
// flags to print by folding every rune of every class, which takes a
// tenth of a second on the policy's negated classes; this prints the
// classes as the ranges they hold (already folded by the parser) and
// (?i) on case-insensitive literals only.
func source(re *syntax.Regexp) string {
	var b strings.Builder
	write(&b, re)
	return b.String()
}

func write(b *strings.Builder, re *syntax.Regexp) {
	group := func(sub *syntax.Regexp) {
		b.WriteString("(?:")
		write(b, sub)
		b.WriteString(")")
	}
	switch re.Op {
	case syntax.OpNoMatch:
		b.WriteString(`[^\x00-\x{10FFFF}]`)
	case syntax.OpEmptyMatch:
		b.WriteString(`(?:)`)
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			b.WriteString("(?i:")
		}
		for _, r := range re.Rune {
			writeRune(b, r)
		}
		if re.Flags&syntax.FoldCase != 0 {
			b.WriteString(")")
		}
	case syntax.OpCharClass:
		b.WriteString("[")
		for i := 0; i+1 < len(re.Rune); i += 2 {
			writeRune(b, re.Rune[i])
			if re.Rune[i+1] != re.Rune[i] {
				b.WriteString("-")
				writeRune(b, re.Rune[i+1])
			}
		}
		if len(re.Rune) == 0 {
			b.WriteString(`^\x00-\x{10FFFF}`)
		}
		b.WriteString("]")
	case syntax.OpAnyCharNotNL:
		b.WriteString(`[^\n]`)
	case syntax.OpAnyChar:
		b.WriteString(`(?s:.)`)
	case syntax.OpBeginLine:
		b.WriteString(`(?m:^)`)
	case syntax.OpEndLine:
		b.WriteString(`(?m:$)`)
	case syntax.OpBeginText:
		b.WriteString(`\A`)
	case syntax.OpEndText:
		b.WriteString(`\z`)
	case syntax.OpWordBoundary:
		b.WriteString(`\b`)
	case syntax.OpNoWordBoundary:
		b.WriteString(`\B`)
	case syntax.OpCapture:
		group(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		group(re.Sub[0])
		switch re.Op {
		case syntax.OpStar:
			b.WriteString("*")
		case syntax.OpPlus:
			b.WriteString("+")
		case syntax.OpQuest:
			b.WriteString("?")
		default:
			b.WriteString("{" + strconv.Itoa(re.Min) + ",")
			if re.Max >= 0 {
				b.WriteString(strconv.Itoa(re.Max))
			}
			b.WriteString("}")
		}
		if re.Flags&syntax.NonGreedy != 0 {
			b.WriteString("?")
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			group(sub)
		}
	case syntax.OpAlternate:
		for i, sub := range re.Sub {
			if i > 0 {
				b.WriteString("|")
			}
			group(sub)
		}
	}
}

func writeRune(b *strings.Builder, r rune) {
	if r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
		b.WriteRune(r)
		return
	}
	b.WriteString(`\x{` + strconv.FormatInt(int64(r), 16) + `}`)
}
