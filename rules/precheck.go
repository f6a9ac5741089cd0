package rules

import (
	"math/bits"
	"regexp/syntax"
	"unicode/utf8"
)

// A preCheck rules out most failing attempts of a literal-anchored search
// before the regexp runs (fastRe.each): most candidates fail a few bytes
// after their literal ("test" is not followed by \w*\s*=\s*\{, "\n" by
// \s*(function\s+)?(pytest|python)), and one anchored regexp attempt costs
// a backtracker's or NFA's set-up, a microsecond or more, where the check
// costs tens of nanoseconds. It follows the pattern's program over the text
// from the candidate on, every thread at once, for up to preDepth runes,
// with each empty-width assertion (^, $, \b) taken as holding: the threads
// it keeps are a superset of the program's, so when none is left no match
// starts at the candidate. It is a necessary condition only: a candidate it
// keeps (a thread reached the match, or some are alive after preDepth runes
// or at the end of the text) is tried by the regexp, which decides.
type preCheck struct {
	start []uint16 // the states the program starts in
	st    []preState
}

// preState is a rune-consuming instruction of the program, or its match.
type preState struct {
	match bool
	ascii [2]uint64    // the ASCII runes it takes
	inst  *syntax.Inst // for the others
	next  []uint16     // the states after it takes a rune
}

// preDepth bounds the runes a preCheck follows; maxPreStates the states it
// tracks (the bit sets of preCheck.may).
const (
	preDepth     = 32
	maxPreStates = 1024
)

// newPreCheck is the check of re's program, nil when it has more states
// than a preCheck tracks.
func newPreCheck(re *syntax.Regexp) *preCheck {
	prog, err := syntax.Compile(re)
	if err != nil {
		return nil
	}
	// number the consuming instructions and the match
	id := make([]int, len(prog.Inst))
	var st []preState
	for i := range prog.Inst {
		in := &prog.Inst[i]
		id[i] = -1
		switch in.Op {
		case syntax.InstMatch, syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			id[i] = len(st)
			st = append(st, preState{match: in.Op == syntax.InstMatch, inst: in})
		}
	}
	if len(st) > maxPreStates {
		return nil
	}
	// closure is the states reachable from instruction pc by empty
	// transitions, every assertion taken as holding
	seen := make([]int, len(prog.Inst)) // the closure that last saw an instruction, from 1
	var stack []uint32
	n := 0
	closure := func(pc uint32) []uint16 {
		var out []uint16
		n++
		stack = append(stack[:0], pc)
		for len(stack) > 0 {
			pc := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[pc] == n {
				continue
			}
			seen[pc] = n
			in := &prog.Inst[pc]
			switch in.Op {
			case syntax.InstAlt, syntax.InstAltMatch:
				stack = append(stack, in.Arg, in.Out)
			case syntax.InstCapture, syntax.InstNop, syntax.InstEmptyWidth:
				stack = append(stack, in.Out)
			case syntax.InstFail:
			default:
				out = append(out, uint16(id[pc]))
			}
		}
		return out
	}
	c := &preCheck{start: closure(uint32(prog.Start)), st: st}
	for i := range st {
		s := &st[i]
		if s.match {
			continue
		}
		for r := rune(0); r < utf8.RuneSelf; r++ {
			if takes(s.inst, r) {
				s.ascii[r/64] |= 1 << (r % 64)
			}
		}
		s.next = closure(s.inst.Out)
	}
	return c
}

// takes reports whether the consuming instruction in takes r.
func takes(in *syntax.Inst, r rune) bool {
	switch in.Op {
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return r != '\n'
	}
	return in.MatchRune(r)
}

// may reports whether a match may start at c in s: false only when none
// does.
func (pc *preCheck) may(s string, c int) bool {
	var sets [2][maxPreStates / 64]uint64
	cur, next := &sets[0], &sets[1]
	for _, j := range pc.start {
		cur[j/64] |= 1 << (j % 64)
	}
	words := (len(pc.st) + 63) / 64
	for p, n := c, 0; ; n++ {
		if p >= len(s) || n == preDepth {
			return true
		}
		r, k := rune(s[p]), 1
		if r >= utf8.RuneSelf {
			r, k = utf8.DecodeRuneInString(s[p:])
		}
		alive := false
		for w := range words {
			for m := cur[w]; m != 0; m &= m - 1 {
				st := &pc.st[w*64+bits.TrailingZeros64(m)]
				if st.match {
					return true
				}
				var ok bool
				if r < utf8.RuneSelf {
					ok = st.ascii[r/64]&(1<<(r%64)) != 0
				} else {
					ok = takes(st.inst, r)
				}
				if ok {
					for _, j := range st.next {
						next[j/64] |= 1 << (j % 64)
					}
					alive = true
				}
			}
			cur[w] = 0
		}
		if !alive {
			return false
		}
		cur, next = next, cur
		p += k
	}
}
