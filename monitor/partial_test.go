package monitor

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
)

// timedFake is a fake sandbox that streams its script on the clock: each
// chunk after its pause, then the process ends.
func timedFake(script []timedChunk) *fake.Streamer {
	return fake.NewStreamer(sandbox.Spec{}, nil, func(_ context.Context, _ *fake.Sandbox, req sandbox.StartRequest, out func(sandbox.Output)) (sandbox.Process, error) {
		var all strings.Builder
		for _, c := range script {
			all.WriteString(c.data)
		}
		p := &chanProc{done: make(chan struct{}), res: sandbox.ExecResult{Output: all.String(), Shell: "bash"}}
		go func() {
			defer close(p.done)
			for _, c := range script {
				time.Sleep(c.after)
				out(sandbox.Output{Stream: sandbox.Stdout, Data: []byte(c.data)})
			}
		}()
		return p, nil
	})
}

type timedChunk struct {
	after time.Duration
	data  string
}

// chanProc ends when done closes.
type chanProc struct {
	done chan struct{}
	res  sandbox.ExecResult
}

func (p *chanProc) PID() int                                     { return 9 }
func (p *chanProc) Input(context.Context, []byte) error          { return nil }
func (p *chanProc) CloseInput(context.Context) error             { return nil }
func (p *chanProc) Signal(context.Context, syscall.Signal) error { return nil }
func (p *chanProc) Wait(context.Context) (sandbox.ExecResult, error) {
	<-p.done
	return p.res, nil
}

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
		script []timedChunk
		want   []sent
	}{
		{"a prompt", []timedChunk{{0, "Continue? [y/n] "}, {time.Second, "y\n"}},
			[]sent{{partialWait, "Continue? [y/n] "}, {time.Second, "y\n"}}},
		{"more of the line restarts the wait", []timedChunk{{0, "abc"}, {150 * time.Millisecond, "def"}, {time.Second, "\n"}},
			[]sent{{150*time.Millisecond + partialWait, "abcdef"}, {1150 * time.Millisecond, "\n"}}},
		{"the line's end sends it at once", []timedChunk{{0, "abc"}, {150 * time.Millisecond, "def\nghi\n"}},
			[]sent{{150 * time.Millisecond, "abcdef\nghi\n"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ep := newEpisode(t, Config{}, timedFake(tc.script))
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
