package rules

import (
	"math/bits"
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
	// class] is the next state's row offset (state*nclass), or, when
	// literals end in that state, the state negated and less one. One
	// load and a sign test per byte of text: the scan reads every call's
	// whole haystack, and half its bytes end a literal (single
	// characters, "in", "rm"), so a match costs a multiplication, not a
	// division.
	next  []int32
	out   [][]int // per state, the literals that end there (their suffix links' too)
	words int     // uint64 words of a found set
}

// newMultiMatcher builds the matcher for lits; empty literals and
// duplicates are dropped.
func newMultiMatcher(lits []string) *multiMatcher {
	m := &multiMatcher{index: map[string]int{}}
	for _, l := range lits {
		if _, dup := m.index[l]; l == "" || dup {
			continue
		}
		m.index[l] = len(m.lits)
		m.lits = append(m.lits, l)
	}
	m.words = (len(m.lits) + 63) / 64
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
	// the trie
	type node struct {
		child map[uint8]int32
		out   []int
	}
	nodes := []node{{child: map[uint8]int32{}}}
	for i, l := range m.lits {
		s := int32(0)
		for j := 0; j < len(l); j++ {
			c := m.class[l[j]]
			n, ok := nodes[s].child[c]
			if !ok {
				n = int32(len(nodes))
				nodes = append(nodes, node{child: map[uint8]int32{}})
				nodes[s].child[c] = n
			}
			s = n
		}
		nodes[s].out = append(nodes[s].out, i)
	}
	// breadth first: suffix links and the full transition table
	nc := m.nclass
	m.next = make([]int32, len(nodes)*nc)
	fail := make([]int32, len(nodes))
	m.out = make([][]int, len(nodes))
	queue := []int32{}
	for c := 0; c < nc; c++ {
		if n, ok := nodes[0].child[uint8(c)]; ok {
			m.next[c] = n
			queue = append(queue, n)
		}
	}
	m.out[0] = nodes[0].out
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		m.out[s] = append(append([]int(nil), nodes[s].out...), m.out[fail[s]]...)
		for c := 0; c < nc; c++ {
			if n, ok := nodes[s].child[uint8(c)]; ok {
				fail[n] = m.next[int(fail[s])*nc+c]
				m.next[int(s)*nc+c] = n
				queue = append(queue, n)
			} else {
				m.next[int(s)*nc+c] = m.next[int(fail[s])*nc+c]
			}
		}
	}
	for i, n := range m.next {
		m.next[i] = n * int32(nc)
		if len(m.out[n]) > 0 {
			m.next[i] = -n - 1
		}
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
// It notes the states it passes that literals end in, each once, and
// sets the literals' bits at the end: most bytes of a haystack end a
// literal, the same few over and over, and a bit per state is cheaper
// than the state's list of literals per byte.
type pass struct {
	m    *multiMatcher
	o    int32    // the state's row offset
	seen []uint64 // the states passed that literals end in, by bit
}

func (m *multiMatcher) newPass() pass {
	return pass{m: m, seen: make([]uint64, (len(m.out)+63)/64)}
}

// feed reads text on, its bytes through cls (class, or fold for a text
// to be read lowercased).
func (p *pass) feed(text string, cls *[256]uint8) {
	o, nc, next, seen := p.o, int32(p.m.nclass), p.m.next, p.seen
	for i := 0; i < len(text); i++ {
		o = next[o+int32(cls[text[i]])]
		if o < 0 {
			s := uint32(-o - 1)
			o = int32(s) * nc
			seen[s/64] |= 1 << (s % 64)
		}
	}
	p.o = o
}

// feedFolded is feed of foldASCII(text), without making it: ASCII bytes
// through fold, every other rune decoded and lowercased as strings.ToLower
// maps it (unicode.ToLower rune by rune, a byte that is not UTF-8 becoming
// U+FFFD), the long s then replaced by "s" as foldASCII does. None of
// those steps reads past the rune at hand, so the bytes it feeds the
// automaton are foldASCII(text)'s, in order (TestMultiMatcherFold).
func (p *pass) feedFolded(text string) {
	var buf [utf8.UTFMax]byte
	for i := 0; i < len(text); {
		j := i
		for j < len(text) && text[j] < utf8.RuneSelf {
			j++
		}
		p.feed(text[i:j], &p.m.fold)
		if j == len(text) {
			break
		}
		r, w := utf8.DecodeRuneInString(text[j:])
		i = j + w
		r = unicode.ToLower(r)
		if r == 'ſ' {
			r = 's'
		}
		p.feed(string(buf[:utf8.EncodeRune(buf[:], r)]), &p.m.class)
	}
}

// into sets in f the bits, offset by off, of the literals read so far.
func (p *pass) into(f found, off int) {
	for w, word := range p.seen {
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
