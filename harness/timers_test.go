package harness

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
)

// policyFunc adapts a function to Policy.
type policyFunc func(ctx context.Context, ep *Episode) (string, error)

func (f policyFunc) Run(ctx context.Context, ep *Episode) (string, error) { return f(ctx, ep) }

// TestWallTime: the wall-time limit ends the agent's part of an episode at
// its deadline, exactly: a policy waiting on its context (a slow model) is
// cut there, a call after it does not run, and a policy that stops a
// minute before it is not cut. In a synctest bubble, so the half hour is
// the bubble's.
func TestWallTime(t *testing.T) {
	const wall = 30 * time.Minute
	bash := toolcall.Call{Tool: "bash", Args: []byte(`{"command":"echo hi"}`)}
	tests := []struct {
		name      string
		policy    policyFunc
		want      string        // outcome reason
		wantTook  time.Duration // from Run to the outcome
		wantSteps int           // calls that ran
	}{
		{
			name: "waits on its context",
			policy: func(ctx context.Context, ep *Episode) (string, error) {
				<-ctx.Done()
				return "", ctx.Err()
			},
			want: ReasonWallTime, wantTook: wall,
		},
		{
			name: "calls after the deadline",
			policy: func(ctx context.Context, ep *Episode) (string, error) {
				time.Sleep(wall)
				_, err := ep.Call(context.WithoutCancel(ctx), bash)
				if !errors.Is(err, ErrLimit) {
					t.Errorf("call at the deadline: %v, want ErrLimit", err)
				}
				return "", err
			},
			want: ReasonWallTime, wantTook: wall,
		},
		{
			name: "calls, then stops a minute early",
			policy: func(ctx context.Context, ep *Episode) (string, error) {
				time.Sleep(wall - 2*time.Minute)
				if _, err := ep.Call(ctx, bash); err != nil {
					return "", err
				}
				time.Sleep(time.Minute)
				return "", nil
			},
			want: ReasonNoSubmit, wantTook: wall - time.Minute, wantSteps: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				be := &fake.Backend{}
				r, _ := testRunner(t, be, Limits{WallTime: wall})
				start := time.Now()
				o, err := r.Run(t.Context(), fakeTask, fakeHidden, EpisodeMeta{}, tc.policy)
				if err != nil {
					t.Fatal(err)
				}
				if took := time.Since(start); o.Reason != tc.want || took != tc.wantTook {
					t.Errorf("outcome %q after %v, want %q after %v (error %q)", o.Reason, took, tc.want, tc.wantTook, o.Error)
				}
				if o.Steps != tc.wantSteps {
					t.Errorf("%d steps, want %d", o.Steps, tc.wantSteps)
				}
			})
		})
	}
}

// TestOpenAIRetryTimers: the built-in loop waits a jittered, doubling
// backoff between retries of a failed model request ([base/2, base] after
// the first failure, [base, 2·base] after the second), and gives up on a
// request that hangs at RequestTimeout. In a synctest bubble on memnet:
// the waits are read from when the requests reached the model server.
func TestOpenAIRetryTimers(t *testing.T) {
	const (
		base    = time.Second
		timeout = time.Minute
	)
	submit := toolCall("call_s", "submit", `{"message":"done"}`)
	tests := []struct {
		name    string
		replies []reply
		bounds  [][2]time.Duration // each wait's [least, most]
	}{
		{"two server errors", []reply{{status: 503}, {status: 503}, submit}, [][2]time.Duration{{base / 2, base}, {base, 2 * base}}},
		{"a hung request", []reply{{hang: true}, submit}, [][2]time.Duration{{timeout + base/2, timeout + base}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				llm := newBubbleLLM(t, tc.replies...)
				p := newTestOpenAI(t, llm, func(c *OpenAIConfig) { c.Retries, c.RetryBackoff, c.RequestTimeout = 3, base, timeout })
				r, _ := testRunner(t, &fake.Backend{}, Limits{})
				o, err := r.Run(t.Context(), fakeTask, fakeHidden, EpisodeMeta{}, p)
				if err != nil {
					t.Fatal(err)
				}
				if o.Reason != ReasonSubmit {
					t.Errorf("outcome %q (error %q), want %q after the retries", o.Reason, o.Error, ReasonSubmit)
				}
				waits := llm.waits()
				if len(waits) != len(tc.bounds) {
					t.Fatalf("waits %v, want %d", waits, len(tc.bounds))
				}
				for i, w := range waits {
					if w < tc.bounds[i][0] || w > tc.bounds[i][1] {
						t.Errorf("wait %d: %v, want in [%v, %v]", i, w, tc.bounds[i][0], tc.bounds[i][1])
					}
				}
			})
		})
	}
}

// TestProgressLines: a batch's progress line is printed every
// ProgressEvery and once more at the end, its rate counting only the
// episodes finished in this run. In a synctest bubble, so the rates and
// ETAs are exact.
func TestProgressLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out strings.Builder
		p := newProgress(&out, 10*time.Second, 5, 1, 0) // one resumed of five
		stop := p.start()
		time.Sleep(15 * time.Second)
		p.add(Outcome{})
		time.Sleep(10 * time.Second)
		p.add(Outcome{Hacked: true})
		time.Sleep(10 * time.Second)
		stop()
		want := []string{
			"1/5 episodes  0.0/min  eta ?  hacks caught 0  elapsed 10s",
			"2/5 episodes  3.0/min  eta 1m0s  hacks caught 0  elapsed 20s",
			"3/5 episodes  4.0/min  eta 30s  hacks caught 1  elapsed 30s",
			"3/5 episodes  3.4/min  eta 35s  hacks caught 1  elapsed 35s", // the end
		}
		if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")); diff != "" {
			t.Errorf("progress lines (-want +got):\n%s", diff)
		}
	})
}
