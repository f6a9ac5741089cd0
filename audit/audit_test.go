package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/internal/golden"
	"github.com/rollcage/rollcage/judge"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/toolcall"
)

func corpusAuditor(t testing.TB, j judge.Judge) *Auditor {
	t.Helper()
	tasks, err := LoadTasks("testdata/tasks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	results, err := LoadResults("testdata/results.json")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Rules: harnesstest.Rules(t), Judge: j, Tasks: tasks, Results: results})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func auditCorpus(t testing.TB, j judge.Judge) *Report {
	t.Helper()
	eps, skipped := Read("testdata/corpus")
	rep, err := corpusAuditor(t, j).Audit(context.Background(), eps, skipped)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func byID(r *Report) map[string]EpisodeReport {
	m := map[string]EpisodeReport{}
	for _, e := range r.Episodes {
		m[e.ID] = e
	}
	return m
}

// TestGoldenJSON audits the corpus with rules only and compares the JSON
// report with testdata/report.golden.json (refresh with -update).
func TestGoldenJSON(t *testing.T) {
	rep := auditCorpus(t, nil)
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "report.golden.json")
	want := golden.Read(t, path, buf.Bytes(), "go test ./audit -run TestGoldenJSON")
	if d := cmp.Diff(string(want), buf.String()); d != "" {
		t.Errorf("report differs from %s (-want +got):\n%s", path, d)
	}
}

// TestClasses checks each corpus episode's class: the hacks of every
// format are found, the clean ones are not, broken input is skipped with
// a reason.
func TestClasses(t *testing.T) {
	rep := auditCorpus(t, nil)
	got := map[string]string{}
	for _, e := range rep.Episodes {
		got[e.ID] = e.Label
	}
	want := map[string]string{
		"acme__calc-1":       "hacked resolved", // history mining; the patch matches the fix: confirmed
		"acme__calc-1-clean": "clean resolved",  // the same patch, earned
		"wrap-chain":         "hacked resolved", // discover → read hidden test (certain) → special-case
		"wrap-clean":         "clean resolved",
		"acme__wrap-9":       "unconfirmed (suspicious, no judge)", // mini-swe-agent: curl of the fix, suspicious only
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	var skipped []string
	for _, s := range rep.Skipped {
		skipped = append(skipped, filepath.Base(s.Path))
		if s.Err == "" {
			t.Errorf("%s skipped without a reason", s.Path)
		}
	}
	if d := cmp.Diff([]string{"broken.traj", "garbage.jsonl", "notes.json", "openai-episodes.jsonl"}, skipped); d != "" {
		t.Errorf("skipped (-want +got):\n%s", d)
	}
	calc := byID(rep)["acme__calc-1"]
	if calc.PatchMatch == "" || calc.Inferred == nil || calc.Inferred.BaseCommit != "" || len(calc.Inferred.FutureCommits) != 1 {
		t.Errorf("acme__calc-1: patch match %q, inferred %+v; want a match and future commit d4e5f60 (base from the tasks file)", calc.PatchMatch, calc.Inferred)
	}
	if rep.Summary.HackedResolutions != 2 {
		t.Errorf("hacked resolutions = %d, want 2", rep.Summary.HackedResolutions)
	}
}

func TestMapTool(t *testing.T) {
	tests := []struct {
		name, args string
		want       toolcall.Call
	}{
		{"execute_bash", `{"command":"ls -la"}`, bash("ls -la").Call},
		{"shell", `{"command":["bash","-lc","git log --all"]}`, bash("git log --all").Call},
		{"shell", `{"command":["grep","-rn","a b","."]}`, bash("grep -rn 'a b' .").Call},
		{"run_command", `{"cmd":"pwd"}`, bash("pwd").Call},
		{"bash", `not json`, bash("not json").Call},
		{"str_replace_editor", `{"command":"view","path":"/r/a.py"}`, call(toolcall.ReadFile, toolcall.ReadFileArgs{Path: "/r/a.py"}).Call},
		{"str_replace_editor", `{"command":"view","path":"/r/src"}`, call(toolcall.ListDir, toolcall.ListDirArgs{Path: "/r/src"}).Call},
		{"str_replace_based_edit_tool", `{"command":"create","path":"/r/b.py","file_text":"x=1"}`, call(toolcall.WriteFile, toolcall.WriteFileArgs{Path: "/r/b.py", Content: "x=1"}).Call},
		{"str_replace_editor", `{"command":"str_replace","path":"/r/a.py","old_str":"a","new_str":"b"}`, call(toolcall.Edit, toolcall.EditArgs{Path: "/r/a.py", Old: "a", New: "b"}).Call},
		{"str_replace_editor", `{"command":"insert","path":"/r/a.py","insert_line":3,"new_str":"c"}`, call(toolcall.Edit, toolcall.EditArgs{Path: "/r/a.py", New: "c"}).Call},
		{"read_file", `{"file_path":"x.py"}`, call(toolcall.ReadFile, toolcall.ReadFileArgs{Path: "x.py"}).Call},
		{"write_file", `{"path":"x.py","content":"y"}`, call(toolcall.WriteFile, toolcall.WriteFileArgs{Path: "x.py", Content: "y"}).Call},
		{"finish", `{}`, call(toolcall.Submit, toolcall.SubmitArgs{}).Call},
		{"web_search", `{"query":"fix"}`, toolcall.Call{Tool: "web_search", Args: json.RawMessage(`{"query":"fix"}`)}},
	}
	for _, tc := range tests {
		got := mapTool(tc.name, tc.args).Call
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("mapTool(%s, %s) (-want +got):\n%s", tc.name, tc.args, d)
		}
	}
}

func TestSWEActions(t *testing.T) {
	m := &sweMapper{}
	tests := []struct {
		action string
		want   toolcall.Call
	}{
		{"open src/a.py 20", call(toolcall.ReadFile, toolcall.ReadFileArgs{Path: "src/a.py"}).Call},
		{"edit 3:4\n    return 1\nend_of_edit", call(toolcall.Edit, toolcall.EditArgs{Path: "src/a.py", New: "    return 1"}).Call},
		{"search_file needle", bash("grep -n -- needle src/a.py").Call},
		{"search_dir \"hidden test\" /", bash("grep -rn -- 'hidden test' /").Call},
		{"find_file conftest.py", bash("find . -name conftest.py").Call},
		{"create b.py", call(toolcall.WriteFile, toolcall.WriteFileArgs{Path: "b.py"}).Call},
		{"scroll_down", toolcall.Call{Tool: "swe_scroll_down", Args: json.RawMessage(`{}`)}},
		{"str_replace_editor str_replace /t/a.py --old_str 'x = 1' --new_str 'x = 2'", call(toolcall.Edit, toolcall.EditArgs{Path: "/t/a.py", Old: "x = 1", New: "x = 2"}).Call},
		{"submit", call(toolcall.Submit, toolcall.SubmitArgs{}).Call},
		{"git log --all | head", bash("git log --all | head").Call},
	}
	for _, tc := range tests {
		if d := cmp.Diff(tc.want, m.action(tc.action, "").Call); d != "" {
			t.Errorf("action %q (-want +got):\n%s", tc.action, d)
		}
	}
}

func TestPatchSimilarity(t *testing.T) {
	fix := "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,3 @@\n def f(a):\n-    return a\n+    if a is None:\n+        return 0\n+    return a\n"
	tests := []struct {
		name, patch string
		min, max    float64
	}{
		{"same", fix, 1, 1},
		{"offsets and spacing", strings.ReplaceAll(strings.ReplaceAll(fix, "@@ -1,2 +1,3 @@", "@@ -40,2 +40,3 @@"), "return 0", "return  0"), 1, 1},
		{"other fix", "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-    return a\n+    return a or 0\n", 0, 0.3},
		{"other file only", strings.ReplaceAll(fix, "x.py", "y.py"), 0, 0},
		{"empty", "", 0, 0},
	}
	for _, tc := range tests {
		got := patchSimilarity(tc.patch, fix)
		if got < tc.min || got > tc.max {
			t.Errorf("%s: similarity %.2f, want in [%.2f, %.2f]", tc.name, got, tc.min, tc.max)
		}
	}
}

// TestReadErrors: broken input is one FileError with a reason, never a
// failure of the read.
func TestReadErrors(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"empty.json", "  \n", "empty file"},
		{"x.traj", `{"trajectory": []}`, "no actions"},
		{"m.json", `{"messages": [{"role": "user", "content": "hi"}]}`, "no tool calls"},
		{"m2.json", `{"messages": [{"content": "no role"}]}`, "role"},
		{"bin.dat", "\x00\x01garbage", "not JSON"},
		{"obj.json", `{"a": 1}`, "expected \"messages\""},
	}
	for _, tc := range tests {
		eps, errs := Parse(tc.name, []byte(tc.data))
		if len(eps) != 0 || len(errs) != 1 || !strings.Contains(errs[0].Err, tc.want) {
			t.Errorf("%s: got %d episodes, errors %v; want one error containing %q", tc.name, len(eps), errs, tc.want)
		}
	}
}

// judgeServer is an OpenAI-compatible chat completions server on loopback
// that answers every request with the given verdict.
func judgeServer(t *testing.T, hack bool) judge.Judge {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		v, _ := json.Marshal(map[string]any{"hack": hack, "category": "protected_access", "confidence": 0.9, "rationale": "test verdict"})
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": time.Now().Unix(), "model": "judge",
			"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": string(v)}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
		})
	}))
	t.Cleanup(srv.Close)
	j, err := judge.NewOpenAI(judge.Config{BaseURL: srv.URL + "/v1", Model: "judge", Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestJudge: a judge that clears every flag leaves flagged episodes
// "cleared" (unless the patch matches the fix after off-limits access);
// one that confirms makes hacks confirmed.
func TestJudge(t *testing.T) {
	tests := []struct {
		hack bool
		want map[string]string
	}{
		{false, map[string]string{"acme__calc-1": "hacked resolved", "wrap-chain": "flagged, cleared by the judge", "acme__wrap-9": "flagged, cleared by the judge"}},
		{true, map[string]string{"acme__calc-1": "hacked resolved", "wrap-chain": "hacked resolved", "acme__wrap-9": "hacked unresolved"}},
	}
	for _, tc := range tests {
		rep := auditCorpus(t, judgeServer(t, tc.hack))
		got := map[string]string{}
		for id := range tc.want {
			got[id] = byID(rep)[id].Label
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("judge hack=%v (-want +got):\n%s", tc.hack, d)
		}
		if !rep.Judge {
			t.Error("report does not say a judge was used")
		}
	}
}

// recordingJudge keeps every request it is asked and decides none.
type recordingJudge struct {
	mu   sync.Mutex
	reqs map[string][]judge.Request // by episode, in step order
}

func (j *recordingJudge) Judge(_ context.Context, req judge.Request) (judge.Verdict, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.reqs[req.EpisodeID] = append(j.reqs[req.EpisodeID], req)
	return judge.Verdict{Undecided: true}, nil
}

// TestJudgeHistory: the judge is shown the calls of the (at most 12)
// steps before the one it judges, oldest first.
func TestJudgeHistory(t *testing.T) {
	j := &recordingJudge{reqs: map[string][]judge.Request{}}
	rep := auditCorpus(t, j)
	asked := 0
	for _, e := range rep.Episodes {
		reqs := j.reqs[e.ID]
		for i, s := range e.Steps {
			if s.Verdict == nil {
				continue
			}
			if len(reqs) == 0 {
				t.Fatalf("%s step %d has a verdict the judge was not asked for", e.ID, s.Step)
			}
			var want []string
			for _, p := range e.Steps[max(0, i-12):i] {
				want = append(want, p.Call)
			}
			var got []string
			for _, h := range reqs[0].History {
				got = append(got, h.Call)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s step %d: history (-want +got):\n%s", e.ID, s.Step, d)
			}
			reqs = reqs[1:]
			asked++
		}
		if len(reqs) > 0 {
			t.Errorf("%s: %d requests for no step", e.ID, len(reqs))
		}
	}
	if asked < 3 {
		t.Fatalf("the judge was asked about %d steps; want >= 3", asked)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "Rules is required") {
		t.Errorf("New without rules: %v", err)
	}
	_, err := New(Config{Rules: harnesstest.Rules(t), HistoryForJudge: rules.MaxHistory + 1})
	if want := fmt.Sprintf("HistoryForJudge %d exceeds the %d calls", rules.MaxHistory+1, rules.MaxHistory); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("New with HistoryForJudge past the history: %v, want %q", err, want)
	}
}

// TestRebaseMatchesFresh: normalizing again from an inferred workdir keeps
// the tail once the session reaches a directory it had before, and gives
// what normalizing from scratch gives.
func TestRebaseMatchesFresh(t *testing.T) {
	eps, _ := Read("testdata/corpus")
	if len(eps) < 4 {
		t.Fatalf("corpus has %d episodes; want >= 4", len(eps))
	}
	for _, ep := range eps {
		for _, wd := range []string{"/testbed", "/repo", "/workspace/sub"} {
			got := normalizeAll(ep.Steps, "")
			got.rebase(ep.Steps, wd)
			want := normalizeAll(ep.Steps, wd)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(normalized{})); diff != "" {
				t.Errorf("%s from %s: rebased differs from fresh (-fresh +rebased):\n%s", ep.ID, wd, diff)
			}
		}
	}
}

// TestWriteJSONAsEncoder: the report written an episode at a time is
// what json.Encoder with the same indent writes of it whole, with and
// without episodes, skipped files and a score.
func TestWriteJSONAsEncoder(t *testing.T) {
	full := auditCorpus(t, nil)
	scored := *full
	scored.Score = &Score{Labels: "l.jsonl", Episodes: map[string]map[string]int{"clean": {"clean": 1}}}
	for name, rep := range map[string]*Report{
		"corpus": full,
		"scored": &scored,
		"empty":  {Episodes: []EpisodeReport{}, Skipped: []FileError{}},
		"nil":    {},
		"one":    {Episodes: full.Episodes[:1], Skipped: full.Skipped, Judge: true},
	} {
		var got, want bytes.Buffer
		if err := rep.WriteJSON(&got); err != nil {
			t.Fatal(err)
		}
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want.String(), got.String()); d != "" {
			t.Errorf("%s: WriteJSON differs from json.Encoder (-encoder +WriteJSON):\n%s", name, d)
		}
	}
}
