package agent

import (
	"strings"
	"testing"
)

func TestCapBuffer(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
		trunc  bool
	}{
		{"empty", 10, nil, "", false},
		{"fits", 10, []string{"hello"}, "hello", false},
		{"exactly", 10, []string{"0123456789"}, "0123456789", false},
		{"chunks fit", 10, []string{"01", "234", "56789"}, "0123456789", false},
		{"cut one write", 10, []string{"0123456789ABCDEF"}, "01234\n[... rollcage: 16 bytes of output, 6 cut from the middle ...]\nBCDEF", true},
		{"cut small writes", 10, strings.Split("0123456789ABCDEF", ""), "01234\n[... rollcage: 16 bytes of output, 6 cut from the middle ...]\nBCDEF", true},
		{"cut big tail write", 4, []string{"ab", "cdefghij"}, "ab\n[... rollcage: 10 bytes of output, 6 cut from the middle ...]\nij", true},
		{"odd max", 5, []string{"abcdefg"}, "ab\n[... rollcage: 7 bytes of output, 2 cut from the middle ...]\nefg", true},
		{"invalid utf8", 64, []string{"a\xff\xfe\x00b\\c"}, `a\xff\xfe\x00b\c`, false},
		{"valid utf8 kept", 64, []string{"héllo ✓ 日本"}, "héllo ✓ 日本", false},
		{"rune split across writes", 64, []string{"\xe6\x97", "\xa5"}, "日", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newCapBuffer(tc.max)
			var total int64
			for _, w := range tc.writes {
				b.Write([]byte(w))
				total += int64(len(w))
			}
			if got := b.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			if b.truncated() != tc.trunc || b.total != total {
				t.Errorf("truncated=%v total=%d, want %v %d", b.truncated(), b.total, tc.trunc, total)
			}
		})
	}
}

// TestCapBufferBoundedMemory writes 100 MB and checks the buffers never
// grew past the cap.
func TestCapBufferBoundedMemory(t *testing.T) {
	b := newCapBuffer(1000)
	chunk := []byte(strings.Repeat("x", 4096))
	for range 100_000_000 / len(chunk) {
		b.Write(chunk)
	}
	if c := cap(b.head) + cap(b.tail); c > 1000 {
		t.Errorf("buffers hold %d bytes of capacity, want <= 1000", c)
	}
}
