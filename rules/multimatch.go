package rules

// A multiMatcher finds which of a fixed set of literals occur in a text in
// one pass (Aho–Corasick, compiled to a DFA over byte classes). The gates
// look for a few hundred keywords in every call's haystack, which may be
// a long script; a strings.Contains per keyword read the haystack once
// per keyword.
type multiMatcher struct {
	lits   []string
	index  map[string]int // literal → its bit
	class  [256]uint8     // byte → alphabet index; 0 is every byte no literal has
	nclass int
	// next is the transition table, row by state: next[state*nclass +
	// class] is the next state's row offset (state*nclass), negated and
	// less one when literals end in that state. One load and a sign test
	// per byte of text: the scan reads every call's whole haystack.
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
			m.next[i] = -m.next[i] - 1
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
	if len(m.lits) == 0 {
		return
	}
	o := int32(0) // the state's row offset
	nc := int32(m.nclass)
	for i := 0; i < len(text); i++ {
		o = m.next[o+int32(m.class[text[i]])]
		if o < 0 {
			o = -o - 1
			for _, l := range m.out[o/nc] {
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
