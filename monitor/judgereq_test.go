package monitor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/judge"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/toolcall"
)

func TestTopFlag(t *testing.T) {
	f := func(rule, cat, sev string) rules.Flag { return rules.Flag{Rule: rule, Category: cat, Severity: sev} }
	tests := []struct {
		name  string
		flags []rules.Flag
		want  string
	}{
		{"one", []rules.Flag{f("a", rules.CatChained, rules.Suspicious)}, "a"},
		{"certain before suspicious", []rules.Flag{f("s", rules.CatNetwork, rules.Suspicious), f("c", rules.CatChained, rules.Certain)}, "c"},
		{"network before tampering", []rules.Flag{f("t", rules.CatTampering, rules.Certain), f("n", rules.CatNetwork, rules.Certain)}, "n"},
		{"protected before chained", []rules.Flag{f("ch", rules.CatChained, rules.Suspicious), f("p", rules.CatProtected, rules.Suspicious)}, "p"},
		{"a tie keeps the first", []rules.Flag{f("x", rules.CatHistory, rules.Certain), f("y", rules.CatHistory, rules.Certain)}, "x"},
		{"an unknown category last", []rules.Flag{f("u", "made_up", rules.Certain), f("e", rules.CatEvaluator, rules.Certain)}, "e"},
	}
	for _, tc := range tests {
		if got := TopFlag(tc.flags).Rule; got != tc.want {
			t.Errorf("%s: TopFlag = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestJudgeRequest: the request carries the task's protected paths, its
// reference URLs and the upstream fix, the flags as given, and only the
// newest histMax steps, copied.
func TestJudgeRequest(t *testing.T) {
	tc := TaskContext{ID: "t1", Instruction: "fix it", ProtectedPaths: []string{"/hidden"}, ReferenceURLs: []string{"https://x/fix"},
		UpstreamFixRef: "abc", BaseCommit: "base"}
	call := toolcall.Call{Tool: toolcall.Bash, Args: json.RawMessage(`{"command":"ls"}`)}
	n := toolcall.Normalized{Raw: "ls"}
	flags := []rules.Flag{{Rule: "r", Category: rules.CatProtected, Severity: rules.Certain, Reason: "why", Evidence: "ev"}}
	hist := []judge.Step{{Call: "$ a"}, {Call: "$ b"}, {Call: "$ c"}}
	req := JudgeRequest(tc, "ep", call, n, flags, hist, 2)
	if req.EpisodeID != "ep" || req.TaskID != "t1" || req.Instruction != "fix it" {
		t.Errorf("ids and instruction: %+v", req)
	}
	if len(req.Protected) != 3 || req.Protected[0] != "/hidden" || req.Protected[1] != "https://x/fix" || !strings.Contains(req.Protected[2], "commit abc") || !strings.Contains(req.Protected[2], "ancestor of base") {
		t.Errorf("Protected = %q", req.Protected)
	}
	if len(req.Flags) != 1 || req.Flags[0] != judge.Flag(flags[0]) {
		t.Errorf("Flags = %+v", req.Flags)
	}
	if len(req.History) != 2 || req.History[0].Call != "$ b" || req.History[1].Call != "$ c" {
		t.Errorf("History = %+v, want the newest two", req.History)
	}
	req.History[0].Call = "changed"
	if hist[1].Call != "$ b" {
		t.Error("the request's history shares the caller's array")
	}
	if !strings.Contains(string(req.Call), `"command":"ls"`) || !strings.Contains(string(req.Normalized), `"ls"`) {
		t.Errorf("Call = %s", req.Call)
	}
	if got := JudgeRequest(tc, "ep", call, n, flags, hist, 0).History; len(got) != 0 {
		t.Errorf("histMax 0: History = %+v, want none", got)
	}
}

func TestJudgeSteps(t *testing.T) {
	long := strings.Repeat("x", 1000)
	s := Shown(toolcall.Call{Tool: toolcall.Bash}, toolcall.Normalized{Raw: long}, long)
	if !strings.HasPrefix(s.Call, "$ x") || len(s.Call) >= 450 || len(s.Output) >= 650 {
		t.Errorf("bash step: call %d bytes, output %d bytes", len(s.Call), len(s.Output))
	}
	if s := Shown(toolcall.Call{Tool: toolcall.ReadFile}, toolcall.Normalized{Raw: "a.py"}, ""); s.Call != "read_file a.py" {
		t.Errorf("read_file step: %q", s.Call)
	}
	s.Rules = []string{"a", "b"}
	got := JudgeSteps([]rules.Shown{s})
	if len(got) != 1 || got[0].Call != s.Call || got[0].Output != s.Output || strings.Join(got[0].Flags, ",") != "a,b" {
		t.Errorf("JudgeSteps = %+v, want the shown call with flags a,b", got)
	}
}
