package rules

import (
	"math/bits"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A multiMatcher finds which of a fixed set of literals occur in a text in
// one pass (Aho–Corasick, compiled to a DFA over byte classes). The gates
// look for a few hundred keywords in every call's haystack, which may be
// a long script; a strings.Contains per keyword read the haystack once
// per keyword.
type multiMatcher struct {
	lits  []string
	index map[string]int // literal → its bit
	class [256]uint8     // byte → alphabet index; 0 is every byte no literal has
	// fold is class as a lowercased text reads it: 'A'-'Z' take the
	// classes of 'a'-'z', so an ASCII text is matched as foldASCII would
	// make it without making it (a literal's own upper-case bytes keep
	// classes no folded byte has: they never match, as in lowercased text)
	fold   [256]uint8
	nclass int
	// next is the transition table, row by state: next[state*nclass +
	// class] is the next state. Its entries are 16 bits wide when the
	// states fit, 32 bits otherwise; the other slice is nil. The default
	// policy's gates have some 3,100 states of 65 classes: 400 KB, not
	// 800, and a scan's loads, each waiting on the last, miss the caches
	// less.
	next16 []uint16
	next32 []uint32
	// accept is the states literals end in, by bit. A pass notes every
	// state it enters, not only these: half a haystack's bytes end a
	// literal, and a branch on it was mispredicted as often.
	accept []uint64
	out    [][]int // per state, the literals that end there (their suffix links' too)
	words  int     // uint64 words of a found set
	// nlLast: a newline in a literal is its last byte. No occurrence in
	// a haystack (gateSet.find) then runs on past a newline, and the
	// occurrences of a string followed by one are the same wherever it
	// stands: reading it again finds nothing new.
	nlLast bool
}

// maxStates16 is the most states a table of 16-bit entries holds; a
// variable so that tests can build the 32-bit one from small literal sets.
var maxStates16 = 1 << 16

// newMultiMatcher builds the matcher for lits; empty literals and
// duplicates are dropped.
func newMultiMatcher(lits []string) *multiMatcher {
	m := &multiMatcher{index: map[string]int{}}
	size := 1 // states: at most one per literal byte, and the start
	for _, l := range lits {
		if _, dup := m.index[l]; l == "" || dup {
			continue
		}
		m.index[l] = len(m.lits)
		m.lits = append(m.lits, l)
		size += len(l)
	}
	m.words = (len(m.lits) + 63) / 64
	m.nlLast = !slices.ContainsFunc(m.lits, func(l string) bool {
		i := strings.IndexByte(l, '\n')
		return i >= 0 && i < len(l)-1
	})
	m.nclass = 1
	for _, l := range m.lits {
		for i := 0; i < len(l); i++ {
			if m.class[l[i]] == 0 {
				m.class[l[i]] = uint8(m.nclass)
				m.nclass++
			}
		}
	}
	m.fold = m.class
	for c := 'a'; c <= 'z'; c++ {
		m.fold[c-'a'+'A'] = m.class[c]
	}
	// the trie, in the table itself: 0 is no child (the start state is
	// nobody's child)
	nc := m.nclass
	next := make([]uint32, size*nc)
	own := make([][]int, size) // per state, the literals that end there
	n := uint32(1)
	for i, l := range m.lits {
		s := uint32(0)
		for j := 0; j < len(l); j++ {
			e := &next[int(s)*nc+int(m.class[l[j]])]
			if *e == 0 {
				*e = n
				n++
			}
			s = *e
		}
		own[s] = append(own[s], i)
	}
	next = next[:int(n)*nc]
	// breadth first: a state's suffix link is shallower, so its row is
	// complete when the state's is filled in from it
	fail := make([]uint32, n)
	m.out = make([][]int, n)
	m.out[0] = own[0]
	queue := make([]uint32, 0, n)
	for c := 0; c < nc; c++ {
		if t := next[c]; t != 0 {
			queue = append(queue, t)
		}
	}
	for q := 0; q < len(queue); q++ {
		s := queue[q]
		m.out[s] = append(own[s][:len(own[s]):len(own[s])], m.out[fail[s]]...)
		row, frow := next[int(s)*nc:][:nc], next[int(fail[s])*nc:][:nc]
		for c, t := range row {
			if t != 0 {
				fail[t] = frow[c]
				queue = append(queue, t)
			} else {
				row[c] = frow[c]
			}
		}
	}
	m.accept = make([]uint64, (n+63)/64)
	for s, o := range m.out {
		if len(o) > 0 {
			m.accept[s/64] |= 1 << (s % 64)
		}
	}
	if int(n) <= maxStates16 {
		m.next16 = make([]uint16, len(next))
		for i, t := range next {
			m.next16[i] = uint16(t)
		}
	} else {
		m.next32 = next
	}
	return m
}

// found is the set of literals a text contains, by bit.
type found []uint64

func (f found) has(i int) bool { return i >= 0 && i/64 < len(f) && f[i/64]&(1<<(i%64)) != 0 }

// find reports which literals occur in text.
func (m *multiMatcher) find(text string) found {
	f := make(found, m.words)
	m.findInto(text, f, 0)
	return f
}

// findInto sets in f the bits of the literals in text, offset by off.
func (m *multiMatcher) findInto(text string, f found, off int) {
	if len(m.lits) > 0 {
		p := m.newPass()
		p.feed(text, &m.class)
		p.into(f, off)
	}
}

// A pass reads one text, possibly in pieces, for the literals it holds.
// It notes the states it passes, each once, and sets the literals' bits
// at the end: most bytes of a haystack end a literal, the same few over
// and over, and a bit per state is cheaper than the state's list of
// literals per byte.
type pass struct {
	m    *multiMatcher
	s    uint     // the state
	seen []uint64 // the states passed, by bit
}

func (m *multiMatcher) newPass() pass {
	return pass{m: m, seen: make([]uint64, len(m.accept))}
}

// An entry is a transition table's entry type.
type entry interface{ uint16 | uint32 }

// feed reads text on, its bytes through cls (class, or fold for a text
// to be read lowercased).
func (p *pass) feed(text string, cls *[256]uint8) {
	if p.m.next16 != nil {
		p.s = feed(p.m.next16, uint(p.m.nclass), p.s, p.seen, text, cls)
	} else {
		p.s = feed(p.m.next32, uint(p.m.nclass), p.s, p.seen, text, cls)
	}
}

// feed runs the table next of nc classes from state s over text, its
// bytes through cls, noting the states entered in seen; it returns the
// state reached.
func feed[E entry](next []E, nc, s uint, seen []uint64, text string, cls *[256]uint8) uint {
	for i := 0; i < len(text); i++ {
		s = uint(next[s*nc+uint(cls[text[i]])])
		seen[s/64] |= 1 << (s % 64)
	}
	return s
}

// feedFolded is feed of foldASCII(text), without making it: ASCII bytes
// through fold, every other rune decoded and lowercased as strings.ToLower
// maps it (unicode.ToLower rune by rune, a byte that is not UTF-8 becoming
// U+FFFD), the long s then replaced by "s" as foldASCII does. None of
// those steps reads past the rune at hand, so the bytes it feeds the
// automaton are foldASCII(text)'s, in order (TestMultiMatcherFold).
func (p *pass) feedFolded(text string) {
	if p.m.next16 != nil {
		p.s = feedFolded(p.m, p.m.next16, p.s, p.seen, text)
	} else {
		p.s = feedFolded(p.m, p.m.next32, p.s, p.seen, text)
	}
}

// feedFolded is feed through m's folding, as pass.feedFolded describes,
// in one loop: the test for ASCII is a branch the haystacks, nearly all
// ASCII, predict.
func feedFolded[E entry](m *multiMatcher, next []E, s uint, seen []uint64, text string) uint {
	nc, fold := uint(m.nclass), &m.fold
	for i := 0; i < len(text); i++ {
		if c := text[i]; c < utf8.RuneSelf {
			s = uint(next[s*nc+uint(fold[c])])
			seen[s/64] |= 1 << (s % 64)
			continue
		}
		b, n, w := foldRune(text[i:])
		i += w - 1
		for _, c := range b[:n] {
			s = uint(next[s*nc+uint(m.class[c])])
			seen[s/64] |= 1 << (s % 64)
		}
	}
	return s
}

// foldRune is what foldASCII makes of the rune text starts with, one that
// is not ASCII: its n bytes in b, and w, the rune's width in text.
func foldRune(text string) (b [utf8.UTFMax]byte, n, w int) {
	r, w := utf8.DecodeRuneInString(text)
	r = unicode.ToLower(r)
	if r == 'ſ' {
		r = 's'
	}
	return b, utf8.EncodeRune(b[:], r), w
}

// feedHay reads the strings of hay through the folding, each followed by
// a newline: a haystack as gateSet.find describes it, but for the strings
// whose bits skip holds (by index, the first 64), which the literals let
// it pass over (multiMatcher.nlLast).
func (p *pass) feedHay(hay []string, skip uint64) {
	for i, s := range hay {
		if skip>>i&1 != 0 {
			continue
		}
		p.feedFolded(s)
		p.feed("\n", &p.m.class)
	}
}

// feedHayPair is p.feedHay(hay, skip) and q.feedHay(hay, skip) in one
// loop, for two matchers of 16-bit tables (it reports false, and reads
// nothing, for others). An episode's gates are two matchers, the
// policy's and the episode's own, and a pass apiece read every haystack
// twice. A pass is a chain of loads, each from the row the last one
// found; two chains are independent, and the processor runs one in the
// other's wait.
func feedHayPair(p, q *pass, hay []string, skip uint64) bool {
	a, b := p.m, q.m
	an, bn := a.next16, b.next16
	if an == nil || bn == nil {
		return false
	}
	anc, bnc := uint(a.nclass), uint(b.nclass)
	af, bf := &a.fold, &b.fold
	sa, sb, seenA, seenB := p.s, q.s, p.seen, q.seen
	for k, text := range hay {
		if skip>>k&1 != 0 {
			continue
		}
		for i := 0; i < len(text); i++ {
			if c := text[i]; c < utf8.RuneSelf {
				sa = uint(an[sa*anc+uint(af[c])])
				sb = uint(bn[sb*bnc+uint(bf[c])])
				seenA[sa/64] |= 1 << (sa % 64)
				seenB[sb/64] |= 1 << (sb % 64)
				continue
			}
			r, n, w := foldRune(text[i:])
			i += w - 1
			for _, c := range r[:n] {
				sa = uint(an[sa*anc+uint(a.class[c])])
				sb = uint(bn[sb*bnc+uint(b.class[c])])
				seenA[sa/64] |= 1 << (sa % 64)
				seenB[sb/64] |= 1 << (sb % 64)
			}
		}
		sa = uint(an[sa*anc+uint(a.class['\n'])])
		sb = uint(bn[sb*bnc+uint(b.class['\n'])])
		seenA[sa/64] |= 1 << (sa % 64)
		seenB[sb/64] |= 1 << (sb % 64)
	}
	p.s, q.s = sa, sb
	return true
}

// into sets in f the bits, offset by off, of the literals read so far.
func (p *pass) into(f found, off int) {
	for w, word := range p.seen {
		word &= p.m.accept[w]
		for word != 0 {
			s := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			for _, l := range p.m.out[s] {
				l += off
				f[l/64] |= 1 << (l % 64)
			}
		}
	}
}

// bit is the literal's index, -1 when the matcher does not know it.
func (m *multiMatcher) bit(lit string) int {
	if i, ok := m.index[lit]; ok {
		return i
	}
	return -1
}
