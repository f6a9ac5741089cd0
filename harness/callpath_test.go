package harness

import (
	"context"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/judge"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox/fake"
)

// pathJudge is a judge that starts a new call's group of stacks and
// observes its own caller: with every call sampled, it is the first
// observation point of each call (the monitor's decide stage).
type pathJudge struct{ cp *harnesstest.CallPath }

func (j pathJudge) Judge(context.Context, judge.Request) (judge.Verdict, error) {
	j.cp.Begin()
	j.cp.Observe(1)
	return judge.Verdict{Confidence: 1}, nil
}

// TestLoopCallPath follows the built-in loop's calls (the OpenAI policy
// against a chat-completions server) to the judge and the sandbox and
// holds each to harness → monitor, every package entered once: by one
// function from one place, across the decide stage (the judge), execute
// (Exec, ReadFile, WriteFile) and check (reading back what a call wrote).
// TestCallPath in package server does the same for the gateway.
func TestLoopCallPath(t *testing.T) {
	llm := newFakeLLM(t,
		toolCall("c1", "bash", `{"command":"echo a > notes.txt"}`),
		toolCall("c2", "write_file", `{"path":"b.py","content":"x = 1\n"}`),
		toolCall("c3", "edit", `{"path":"b.py","old":"x = 1","new":"x = 2"}`),
		toolCall("c4", "read_file", `{"path":"b.py"}`),
		toolCall("c5", "submit", `{"message":"done"}`),
	)
	cp := &harnesstest.CallPath{}
	r, _ := newTestRunner(t, Config{Backend: harnesstest.ObserveBackend(&fake.Backend{}, cp)})
	r.cfg.Monitor = harnesstest.Monitor(t, monitor.Config{Judge: pathJudge{cp}, AuditRate: 1})
	o, err := r.Run(t.Context(), fakeTask, fakeHidden, EpisodeMeta{}, newTestOpenAI(t, llm, nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.Steps != 5 {
		t.Fatalf("%d steps, want 5", o.Steps)
	}
	calls := cp.Calls()
	if len(calls) != 5 {
		t.Fatalf("the judge saw %d calls, want 5", len(calls))
	}
	for i, stacks := range calls {
		var onPath []harnesstest.Stack
		for _, s := range stacks {
			// Grading after submit reaches the episode's sandbox without
			// the monitor; it is no call's path.
			if i < 4 || containsPkg(s, "monitor") {
				onPath = append(onPath, s)
			}
		}
		if i < 4 && len(onPath) < 2 {
			t.Errorf("call %d: observed %d times, want the judge and the sandbox at least", i+1, len(onPath))
		}
		for _, p := range harnesstest.Check(onPath, []string{"harness", "monitor"}) {
			t.Errorf("call %d: %s", i+1, p)
		}
	}
}

func containsPkg(s harnesstest.Stack, pkg string) bool {
	return strings.Contains(" "+strings.Join(s.Pkgs(), " ")+" ", " "+pkg+" ")
}
