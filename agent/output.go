package agent

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rollcage/rollcage/sandbox"
)

// DefaultMaxOutput is the output cap when ExecRequest.MaxOutput is zero.
const DefaultMaxOutput = 64 << 10

// capBuffer keeps the first half and the last half of a byte stream of any
// length in fixed memory: the head is filled first, then a ring buffer holds
// the tail. It is not safe for concurrent use.
type capBuffer struct {
	max   int
	head  []byte
	tail  []byte // ring of capacity max - max/2
	pos   int    // next write position in tail
	full  bool   // tail has wrapped at least once
	total int64
}

func newCapBuffer(max int) *capBuffer {
	if max <= 0 {
		max = DefaultMaxOutput
	}
	return &capBuffer{max: max, head: make([]byte, 0, min(max/2, 64<<10))}
}

func (b *capBuffer) Write(p []byte) (int, error) {
	n := len(p)
	b.total += int64(n)
	if room := b.max/2 - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	tmax := b.max - b.max/2
	if len(p) == 0 || tmax == 0 {
		return n, nil
	}
	if len(p) >= tmax {
		// Only the last tmax bytes can survive.
		if cap(b.tail) < tmax {
			b.tail = make([]byte, tmax)
		}
		b.tail = b.tail[:tmax]
		copy(b.tail, p[len(p)-tmax:])
		b.pos, b.full = 0, true
		return n, nil
	}
	for len(p) > 0 {
		if !b.full && b.pos+len(p) > len(b.tail) {
			// Grow lazily so small outputs stay small.
			grow := min(tmax, max(2*len(b.tail), b.pos+len(p), 4096))
			nt := make([]byte, grow)
			copy(nt, b.tail[:b.pos])
			b.tail = nt
		}
		k := copy(b.tail[b.pos:], p)
		p = p[k:]
		b.pos += k
		if b.pos == tmax {
			b.pos, b.full = 0, true
		}
	}
	return n, nil
}

// fill puts what b kept, how much it saw and whether it cut into res.
func (b *capBuffer) fill(res *sandbox.ExecResult) {
	res.Output, res.TotalBytes, res.Truncated = b.String(), b.total, b.truncated()
}

// tailBytes returns the tail in stream order.
func (b *capBuffer) tailBytes() []byte {
	if !b.full {
		return b.tail[:b.pos]
	}
	out := make([]byte, 0, len(b.tail))
	out = append(out, b.tail[b.pos:]...)
	return append(out, b.tail[:b.pos]...)
}

// truncated reports whether bytes were cut from the middle.
func (b *capBuffer) truncated() bool { return b.total > int64(b.max) }

// String renders the kept output, escaped, with the truncation marker
// between head and tail when bytes were cut.
func (b *capBuffer) String() string {
	var sb strings.Builder
	sb.Grow(len(b.head) + len(b.tail) + 100)
	escapeTo(&sb, b.head)
	if b.truncated() {
		fmt.Fprintf(&sb, "\n[... rollcage: %d bytes of output, %d cut from the middle ...]\n",
			b.total, b.total-int64(b.max))
	}
	escapeTo(&sb, b.tailBytes())
	return sb.String()
}

// escapeTo writes p as valid UTF-8: bytes that are not part of a valid
// sequence, and NUL, become \xNN. A literal backslash is left alone, so the
// result reads naturally but cannot be decoded back unambiguously.
func escapeTo(sb *strings.Builder, p []byte) {
	const hex = "0123456789abcdef"
	for len(p) > 0 {
		// Fast path over runs of printable ASCII.
		i := 0
		for i < len(p) && p[i] < utf8.RuneSelf && p[i] != 0 {
			i++
		}
		sb.Write(p[:i])
		p = p[i:]
		if len(p) == 0 {
			return
		}
		r, size := utf8.DecodeRune(p)
		if (r == utf8.RuneError && size == 1) || r == 0 {
			sb.WriteString(`\x`)
			sb.WriteByte(hex[p[0]>>4])
			sb.WriteByte(hex[p[0]&0xf])
			p = p[1:]
			continue
		}
		sb.Write(p[:size])
		p = p[size:]
	}
}
