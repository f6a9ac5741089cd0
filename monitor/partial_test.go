package monitor

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
)

// TestStreamedPartialLine: a line without its end (a prompt) is held back
// partialWait for the rest, then sent as it is; more of the line starts
// the wait again, and the line's end sends it at once. In a synctest
// bubble: the streamed pieces are timed on its clock, exactly.
func TestStreamedPartialLine(t *testing.T) {
	type sent struct {
		At   time.Duration
		Data string
	}
	tests := []struct {
		name   string
		script []fake.Step
		want   []sent
	}{
		{"a prompt", []fake.Step{{Data: "Continue? [y/n] "}, {After: time.Second, Data: "y\n"}},
			[]sent{{partialWait, "Continue? [y/n] "}, {time.Second, "y\n"}}},
		{"more of the line restarts the wait", []fake.Step{{Data: "abc"}, {After: 150 * time.Millisecond, Data: "def"}, {After: time.Second, Data: "\n"}},
			[]sent{{150*time.Millisecond + partialWait, "abcdef"}, {1150 * time.Millisecond, "\n"}}},
		{"the line's end sends it at once", []fake.Step{{Data: "abc"}, {After: 150 * time.Millisecond, Data: "def\nghi\n"}},
			[]sent{{150 * time.Millisecond, "abcdef\nghi\n"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ep := newEpisode(t, Config{}, fake.NewStreamer(sandbox.Spec{}, nil, fake.Script(tc.script...)))
				var mu sync.Mutex
				var got []sent
				start := time.Now()
				out := func(o sandbox.Output) {
					mu.Lock()
					got = append(got, sent{time.Since(start), string(o.Data)})
					mu.Unlock()
				}
				r, err := ep.Start(t.Context(), numbered(ep, toolcall.Prepare(bash("./ask.sh"))), false, out)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.Check(t.Context()); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("streamed (-want +got):\n%s", diff)
				}
			})
		})
	}
}
