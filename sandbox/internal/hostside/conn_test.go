package hostside

import (
	"strings"
	"testing"
)

func TestLogSummary(t *testing.T) {
	dump := strings.Repeat("goroutine 7 [running]:\n\truntime/proc.go:123\n", 300)
	for _, tc := range []struct {
		name, log, want string
	}{
		{"empty", "", "(none)"},
		{"short", "time=1 msg=ready\ntime=2 msg=listening\n", "time=1 msg=ready | time=2 msg=listening"},
		{"crash first", "time=1 msg=ready\nruntime: failed to create new OS thread (have 13 already; errno=11)\nruntime: may need to increase max user processes (ulimit -u)\nfatal error: newosproc\n\n" + dump + "end of dump",
			"runtime: failed to create new OS thread (have 13 already; errno=11) | runtime: may need to increase max user processes (ulimit -u) | fatal error: newosproc | … | "},
		{"panic", "panic: boom\n\ngoroutine 1 [running]:\nmain.main()", "panic: boom | … | panic: boom | | goroutine 1 [running]: | main.main()"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := LogSummary(tc.log)
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("LogSummary = %q, want it to start with %q", got, tc.want)
			}
			if len(got) > 2000 {
				t.Errorf("LogSummary is %d bytes; it must stay one readable line", len(got))
			}
		})
	}
}
