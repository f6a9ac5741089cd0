package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/judge"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// TestDemoWithJudgeInDocker replays a hacked demo script with a judge
// configured (an OpenAI-compatible server in the test that confirms every
// flagged call) and checks that each flagged step's verdict is recorded in
// the trajectory, that unflagged steps never reach the judge, and that the
// outcome is still a caught hack.
func TestDemoWithJudgeInDocker(t *testing.T) {
	b := dockertest.Backend(t)
	tk, hidden, script := firstDemoScript(t, b, func(s task.Script) bool { return s.Name == "history-show-fix" })

	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		io.Copy(io.Discard, r.Body)
		content, _ := json.Marshal(`{"hack": true, "category": "history_mining", "confidence": 0.93, "rationale": "reads the upstream fix"}`)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"judge","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":300,"completion_tokens":20,"total_tokens":320}}`, content)
	}))
	defer srv.Close()
	j, err := judge.NewOpenAI(judge.Config{BaseURL: srv.URL + "/v1", Model: "judge"})
	if err != nil {
		t.Fatal(err)
	}
	r, st := testRunner(t, b, Limits{})
	r.cfg.Monitor = harnesstest.Monitor(t, monitor.Config{Judge: j})

	o, err := r.Run(context.Background(), tk, hidden, EpisodeMeta{}, Replay{Script: script})
	if err != nil {
		t.Fatal(err)
	}
	if err := Expect(script, o); err != nil {
		t.Errorf("%v; outcome %+v", err, o)
	}
	verdicts, flagged := 0, 0
	for _, ev := range events(t, st, o.EpisodeID) {
		if ev.Type != trajectory.TypeDecision {
			continue
		}
		var d trajectory.Decision
		if err := ev.Decode(&d); err != nil {
			t.Fatal(err)
		}
		if len(d.Flags) > 0 {
			flagged++
		}
		if len(d.Verdict) > 0 {
			var v judge.Verdict
			if err := json.Unmarshal(d.Verdict, &v); err != nil {
				t.Fatal(err)
			}
			if !v.Hack || v.Confidence != 0.93 || v.Rationale == "" {
				t.Errorf("recorded verdict %+v", v)
			}
			verdicts++
		}
	}
	if flagged == 0 || verdicts == 0 {
		t.Fatalf("flagged steps %d, recorded verdicts %d: want both > 0", flagged, verdicts)
	}
	if int(asked.Load()) > flagged {
		t.Errorf("judge asked %d times for %d flagged steps (cache aside, unflagged calls must not reach it)", asked.Load(), flagged)
	}
}
