package rules

import (
	"math/bits"
	"strings"
)

// A litGroup searches several literals of a pattern in one pass over the
// text (litSet): those that may occur anywhere and start their match the
// same back runes before them, or those at a line start ((?m)^), looked
// for with the newline before them. Each literal used to be looked for
// with a strings.Index of its own, which read the text once per literal
// (a pattern has up to 64) and stopped at every occurrence of each one's
// first byte: more than half of the search's time on real trajectories.
type litGroup struct {
	set  *litSet
	back int
	// line: set holds "\n"+s for each literal s of lits and a match
	// starts after the newline; lits are for the line the text starts with
	line bool
	lits []string
}

// groupLits groups the literals of ls that may occur anywhere by their
// back, and those at a line start; single are the indices of the others
// (at the start of the text, where candidate only tries position 0, or
// empty after back runes, which a litSet cannot hold).
func groupLits(ls []lit) (groups []litGroup, single []int) {
	var keys [][]string // per group, the strings its set holds
	for i, l := range ls {
		line := l.at == litLineStart
		if !line && (l.at != litAnywhere || l.s == "") {
			single = append(single, i)
			continue
		}
		k := 0
		for k < len(groups) && (groups[k].back != l.back || groups[k].line != line) {
			k++
		}
		if k == len(groups) {
			groups = append(groups, litGroup{back: l.back, line: line})
			keys = append(keys, nil)
		}
		if line {
			groups[k].lits = append(groups[k].lits, l.s)
			keys[k] = append(keys[k], l.nl)
		} else {
			keys[k] = append(keys[k], l.s)
		}
	}
	for k := range groups {
		groups[k].set = newLitSet(keys[k])
	}
	return groups, single
}

// candidate is the first position at or after from where a match may
// start at a literal of g in low, or -1: the least of its literals'
// lit.candidate.
func (g *litGroup) candidate(low string, from int) int {
	if g.line {
		if from == 0 {
			for _, s := range g.lits {
				if strings.HasPrefix(low, s) {
					return 0
				}
			}
		}
		// a line starts after each newline: find "\n"+s with its newline
		// at from-1 or later
		q := g.set.index(low, max(from, 1)-1)
		if q < 0 {
			return -1
		}
		return q + 1
	}
	// the start back runes before an occurrence grows with it: the first
	// occurrence whose start is at from or later gives the least
	for q := from; q < len(low); q++ {
		if q = g.set.index(low, q); q < 0 {
			return -1
		}
		if c, ok := runesBefore(low, q, g.back); ok && c >= from {
			return c
		}
	}
	return -1
}

// A litSet finds where any of up to 64 non-empty literals next occurs in
// a text. Bit i of first[b] says literal i starts with byte b, of
// second[b] that its second byte is b (a literal of one byte has every
// second bit): the text is read four positions at a time, and a position
// is tried (HasPrefix) only where both masks agree. When every literal
// starts with the same byte, IndexByte (vectorized) skips to it instead.
type litSet struct {
	lits   []string
	first  [256]uint64
	second [256]uint64
	short  uint64 // the one-byte literals, the only ones at a text's last byte
	only   int    // the byte every literal starts with, or -1
}

// newLitSet is the set of lits: 1 to 64 literals, none empty.
func newLitSet(lits []string) *litSet {
	s := &litSet{lits: lits, only: int(lits[0][0])}
	for i, l := range lits {
		bit := uint64(1) << i
		s.first[l[0]] |= bit
		if int(l[0]) != s.only {
			s.only = -1
		}
		if len(l) == 1 {
			s.short |= bit
			for b := range s.second {
				s.second[b] |= bit
			}
			continue
		}
		s.second[l[1]] |= bit
	}
	return s
}

// index is the first position at or after from where a literal of s
// occurs in text, or -1.
func (s *litSet) index(text string, from int) int {
	p := from
	if s.only >= 0 {
		for p < len(text) {
			j := strings.IndexByte(text[p:], byte(s.only))
			if j < 0 {
				return -1
			}
			if p += j; s.at(text, p, s.pair(text, p)) {
				return p
			}
			p++
		}
		return -1
	}
	for ; p+4 < len(text); p += 4 {
		w := text[p : p+5]
		m0 := s.first[w[0]] & s.second[w[1]]
		m1 := s.first[w[1]] & s.second[w[2]]
		m2 := s.first[w[2]] & s.second[w[3]]
		m3 := s.first[w[3]] & s.second[w[4]]
		if m0|m1|m2|m3 == 0 {
			continue
		}
		switch {
		case m0 != 0 && s.at(text, p, m0):
			return p
		case m1 != 0 && s.at(text, p+1, m1):
			return p + 1
		case m2 != 0 && s.at(text, p+2, m2):
			return p + 2
		case m3 != 0 && s.at(text, p+3, m3):
			return p + 3
		}
	}
	for ; p < len(text); p++ {
		if s.at(text, p, s.pair(text, p)) {
			return p
		}
	}
	return -1
}

// pair is the literals whose first two bytes text has at p (at its last
// byte, the one-byte literals it starts).
func (s *litSet) pair(text string, p int) uint64 {
	if p+1 < len(text) {
		return s.first[text[p]] & s.second[text[p+1]]
	}
	return s.first[text[p]] & s.short
}

// at reports whether one of the literals in m occurs at p in text.
func (s *litSet) at(text string, p int, m uint64) bool {
	for ; m != 0; m &= m - 1 {
		if strings.HasPrefix(text[p:], s.lits[bits.TrailingZeros64(m)]) {
			return true
		}
	}
	return false
}
