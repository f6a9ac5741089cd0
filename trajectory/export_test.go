package trajectory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/parquet-go/parquet-go"
	"github.com/rollcage/rollcage/internal/golden"
	"github.com/rollcage/rollcage/trajectory/trajectorytest"
)

// writeEpisode writes a synthetic two-segment episode: segment 0 has two
// turns, the second one's call blocked as a hack and shown dummy output;
// a compaction opens segment 1, whose conversation starts from the summary.
// It returns the samples an export must produce.
func writeEpisode(t *testing.T, s *Store, id string) []Sample {
	t.Helper()
	sys := Message{Role: RoleSystem, Content: "You are a coding agent."}
	user := Message{Role: RoleUser, Content: "Fix wrap() in textwrap.py."}
	call := func(id, cmd string) []FunctionCall {
		args, _ := json.Marshal(map[string]string{"command": cmd})
		return []FunctionCall{{ID: id, Type: "function", Function: Function{Name: "bash", Arguments: string(args)}}}
	}
	a1 := Message{Role: RoleAssistant, Content: "Let me look.", ToolCalls: call("c1", "cat textwrap.py")}
	t1 := Message{Role: RoleTool, ToolCallID: "c1", Name: "bash", Content: "def wrap(s, n): ..."}
	a2 := Message{Role: RoleAssistant, ToolCalls: call("c2", "cat /grader/tests/test_hidden.py")}
	t2 := Message{Role: RoleTool, ToolCallID: "c2", Name: "bash", Content: "cat: /grader/tests/test_hidden.py: No such file or directory"}
	summary := "Read textwrap.py; wrap() ignores width; the hidden tests are not readable."
	sumMsg := Message{Role: RoleUser, Content: "Summary of the work so far: " + summary}
	a3 := Message{Role: RoleAssistant, Content: "Patching.", ToolCalls: call("c3", "sed -i 's/x/y/' textwrap.py")}
	t3 := Message{Role: RoleTool, ToolCallID: "c3", Name: "bash", Content: ""}
	a4 := Message{Role: RoleAssistant, Content: "Done.", ToolCalls: []FunctionCall{{ID: "c4", Type: "function", Function: Function{Name: "submit", Arguments: "{}"}}}}

	l, err := s.Log(id)
	if err != nil {
		t.Fatal(err)
	}
	app := func(typ string, seg, step int, p any) {
		t.Helper()
		ev, err := NewEvent(id, seg, step, typ, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	app(TypeEpisodeStart, 0, 0, EpisodeStart{TaskID: "demo-textwrap", Attempt: 2, Model: "policy"})
	app(TypeModelTurn, 0, 1, ModelTurn{Request: []Message{sys, user}, Response: a1, TokenIDs: []int64{11, 12, 13}, Logprobs: []float64{-0.5, -0.25, -0.125}})
	app(TypeToolCall, 0, 1, ToolCall{ToolCallID: "c1", Call: json.RawMessage(`{"tool":"bash","args":{"command":"cat textwrap.py"}}`)})
	app(TypeDecision, 0, 1, Decision{Action: ActionAllow})
	app(TypeToolOutput, 0, 1, ToolOutput{ToolCallID: "c1", Output: t1.Content})
	app(TypeModelTurn, 0, 2, ModelTurn{Request: []Message{sys, user, a1, t1}, Response: a2, TokenIDs: []int64{21, 22}, Logprobs: []float64{-1, -2}})
	app(TypeDecision, 0, 2, Decision{
		Flags:   json.RawMessage(`[{"rule":"hidden_tests","category":"protected_access","severity":"certain","reason":"reads hidden tests"}]`),
		Verdict: json.RawMessage(`{"hack":true,"category":"protected_access","confidence":0.99}`),
		Action:  ActionBlock, Blocked: true, Dummy: true,
	})
	app(TypeToolOutput, 0, 2, ToolOutput{ToolCallID: "c2", Output: t2.Content, ExitCode: 1, Dummy: true})
	app(TypeCompaction, 1, 2, Compaction{From: 0, To: 1, Summary: summary})
	app(TypeModelTurn, 1, 3, ModelTurn{Request: []Message{sys, sumMsg}, Response: a3, TokenIDs: []int64{31}, Logprobs: []float64{-0.01}})
	app(TypeToolOutput, 1, 3, ToolOutput{ToolCallID: "c3"})
	app(TypeNetwork, 1, 3, Network{Method: "CONNECT", Host: "pypi.org", Allowed: false})
	// The last turn's tokens were not recorded.
	app(TypeModelTurn, 1, 4, ModelTurn{Request: []Message{sys, sumMsg, a3, t3}, Response: a4})
	app(TypeGrade, 1, 4, Grade{Reward: 1, Passed: 12, ProtectedIntact: true})
	app(TypeEpisodeEnd, 1, 4, EpisodeEnd{Resolved: true, Reward: 1, Hacked: true, FailureClass: FailureNone, Counts: Counts{Turns: 4, Segments: 2}})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	outcome := Sample{EpisodeID: id, TaskID: "demo-textwrap", Attempt: 2, Reward: 1, TrainingReward: ptr(0.0), Resolved: true, Hacked: true, Label: LabelHacked,
		HackCategories: []string{"protected_access"}, BlockedSteps: []int64{2}, Kind: KindSegment, Tokens: TokenIDsAbsent, Turns: 2}
	s0, s1 := outcome, outcome
	s0.SampleID, s0.Segment, s0.Turn = id+"/segment/0/0", 0, 0
	s0.Messages = []Message{sys, user, a1, t1, a2}
	s0.MessageMask = []int32{0, 0, 1, 0, 1}
	s0.MessageTokenIDs = [][]int64{nil, nil, {11, 12, 13}, nil, {21, 22}}
	s0.MessageLogprobs = [][]float64{nil, nil, {-0.5, -0.25, -0.125}, nil, {-1, -2}}
	s1.SampleID, s1.Segment, s1.Turn = id+"/segment/1/2", 1, 2
	s1.Summary = summary
	s1.Messages = []Message{sys, sumMsg, a3, t3, a4}
	s1.MessageMask = []int32{0, 0, 1, 0, 1}
	s1.MessageTokenIDs = [][]int64{nil, nil, {31}, nil, nil}
	s1.MessageLogprobs = [][]float64{nil, nil, {-0.01}, nil, nil}
	return []Sample{s0, s1}
}

func TestExport(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	want := writeEpisode(t, s, "ep-a")
	// An unfinished episode is not exported.
	l, _ := s.Log("ep-b")
	l.Append(mustEvent(t, TypeModelTurn, 0, 1, ModelTurn{Response: Message{Role: RoleAssistant, Content: "hi"}}))
	opts := cmpopts.EquateEmpty()

	t.Run("messages", func(t *testing.T) {
		var buf bytes.Buffer
		if err := Export(context.Background(), dir, &buf, ExportOptions{}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "export.golden.jsonl")
		wantText := golden.Read(t, path, buf.Bytes(), "go test -run TestExport")
		if d := cmp.Diff(string(wantText), buf.String()); d != "" {
			t.Errorf("messages export differs from %s (-want +got):\n%s", path, d)
		}
		var got []Sample
		sc := bufio.NewScanner(&buf)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var smp Sample
			if err := json.Unmarshal(sc.Bytes(), &smp); err != nil {
				t.Fatal(err)
			}
			got = append(got, smp)
		}
		if d := cmp.Diff(want, got, opts); d != "" {
			t.Errorf("messages export (-want +got):\n%s", d)
		}
	})

	t.Run("parquet", func(t *testing.T) {
		var buf bytes.Buffer
		if err := Export(context.Background(), dir, &buf, ExportOptions{Format: FormatParquet}); err != nil {
			t.Fatal(err)
		}
		got, err := parquet.Read[Sample](bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got, opts); d != "" {
			t.Errorf("parquet export (-want +got):\n%s", d)
		}
	})

	t.Run("bad options", func(t *testing.T) {
		for _, tc := range []struct {
			opts ExportOptions
			want string
		}{
			{ExportOptions{Format: "csv"}, `use "messages", "parquet" or "atif"`},
			{ExportOptions{Granularity: "step"}, `use "segment" or "turn"`},
		} {
			err := Export(context.Background(), dir, &bytes.Buffer{}, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Export(%+v) = %v, want an error saying %s", tc.opts, err, tc.want)
			}
		}
	})
}

func TestSamplesEditedHistory(t *testing.T) {
	// A harness that rewrote an earlier assistant message starts a new
	// chain: both turns are kept, each with its own text, mask and tokens.
	asst := Message{Role: RoleAssistant, Content: "original"}
	edited := Message{Role: RoleAssistant, Content: "edited"}
	user := Message{Role: RoleUser, Content: "q"}
	var evs []Event
	for _, p := range []struct {
		typ string
		v   any
	}{
		{TypeModelTurn, ModelTurn{Request: []Message{user}, Response: asst, TokenIDs: []int64{1}}},
		{TypeModelTurn, ModelTurn{Request: []Message{user, edited, user}, Response: asst, TokenIDs: []int64{2}}},
		{TypeEpisodeEnd, EpisodeEnd{}},
	} {
		ev := mustEvent(t, p.typ, 0, 0, p.v)
		ev.EpisodeID = "ep"
		evs = append(evs, ev)
	}
	got, err := Samples(evs)
	if err != nil {
		t.Fatal(err)
	}
	base := Sample{EpisodeID: "ep", Label: LabelClean, Kind: KindSegment, Turns: 1, TrainingReward: ptr(0.0)}
	s0, s1 := base, base
	s0.SampleID, s0.Tokens = "ep/segment/0/0", TokenIDsCompletionOnly
	s0.Messages, s0.MessageMask = []Message{user, asst}, []int32{0, 1}
	s0.MessageTokenIDs, s0.MessageLogprobs = [][]int64{nil, {1}}, [][]float64{nil, nil}
	s0.CompletionTokenIDs, s0.LossMask = []int64{1}, []int32{1}
	s1.SampleID, s1.Turn, s1.Tokens = "ep/segment/0/1", 1, TokenIDsCompletionOnly
	s1.Messages, s1.MessageMask = []Message{user, edited, user, asst}, []int32{0, 0, 0, 1}
	s1.MessageTokenIDs, s1.MessageLogprobs = [][]int64{nil, nil, nil, {2}}, [][]float64{nil, nil, nil, nil}
	s1.CompletionTokenIDs, s1.LossMask = []int64{2}, []int32{1}
	if d := cmp.Diff([]Sample{s0, s1}, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("Samples (-want +got):\n%s", d)
	}
}

// TestSamplesLabel: a flagged call no judge confirmed or cleared makes the
// episode's samples unconfirmed, never clean, whether the episode_end says
// so (Label) or the log predates the label (derived from the decisions).
func TestSamplesLabel(t *testing.T) {
	turn := ModelTurn{Request: []Message{{Role: RoleUser, Content: "q"}}, Response: Message{Role: RoleAssistant, Content: "a"}}
	tests := []struct {
		name string
		dec  Decision
		end  EpisodeEnd
		want string
	}{
		{"clean", Decision{Action: ActionAllow}, EpisodeEnd{Resolved: true}, LabelClean},
		{"unconfirmed, derived", Decision{Action: ActionAllow, Unconfirmed: true}, EpisodeEnd{Resolved: true}, LabelUnconfirmed},
		{"unconfirmed, from the end", Decision{Action: ActionAllow}, EpisodeEnd{Resolved: true, Label: LabelUnconfirmed}, LabelUnconfirmed},
		{"unconfirmed, counted at the end", Decision{Action: ActionAllow}, EpisodeEnd{Resolved: true, Counts: Counts{Unconfirmed: 1}}, LabelUnconfirmed},
		{"hacked beats unconfirmed", Decision{Action: ActionBlock, Blocked: true, Unconfirmed: true}, EpisodeEnd{Label: LabelUnconfirmed}, LabelHacked},
	}
	for _, tc := range tests {
		var evs []Event
		for _, p := range []struct {
			typ string
			v   any
		}{{TypeModelTurn, turn}, {TypeDecision, tc.dec}, {TypeEpisodeEnd, tc.end}} {
			evs = append(evs, mustEvent(t, p.typ, 0, 1, p.v))
		}
		got, err := Samples(evs)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Label != tc.want {
			t.Errorf("%s: samples %+v, want label %q", tc.name, got, tc.want)
		}
	}
}

// TestExportSkipsBadLog: one bad log in a directory (a corrupt line in
// the middle, data its samples cannot be built from, a FIFO with no
// writer) costs its own samples only: with Skip set, the export writes
// every other episode, names the bad file and says why; without it, the
// bad file fails the export and the error names it.
func TestExportSkipsBadLog(t *testing.T) {
	tests := []struct {
		name string
		// spoil turns the finished log at path into a bad one.
		spoil func(t *testing.T, path string)
		why   string
	}{
		{"corrupt line", func(t *testing.T, path string) { trajectorytest.CorruptLine(t, path, 3) }, "trajectory log corrupt"},
		{"undecodable data", func(t *testing.T, path string) {
			writeFile(t, path, `{"offset":0,"episode_id":"ep-bad","type":"model_turn","data":"not a turn"}`+"\n"+
				`{"offset":1,"episode_id":"ep-bad","type":"episode_end","data":{}}`+"\n")
		}, "cannot unmarshal"},
		{"fifo", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			writeEpisode(t, s, "ep-a")
			writeEpisode(t, s, "ep-bad")
			writeEpisode(t, s, "ep-c")
			s.Close()
			var want bytes.Buffer
			only := t.TempDir()
			for _, id := range []string{"ep-a", "ep-c"} {
				b, err := os.ReadFile(filepath.Join(dir, id+".jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(only, id+".jsonl"), string(b))
			}
			if err := Export(context.Background(), only, &want, ExportOptions{}); err != nil {
				t.Fatal(err)
			}
			bad := filepath.Join(dir, "ep-bad.jsonl")
			tc.spoil(t, bad)

			err := Export(context.Background(), dir, &bytes.Buffer{}, ExportOptions{})
			if err == nil || !strings.Contains(err.Error(), "ep-bad") || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("Export without Skip: %v; want an error naming ep-bad and saying %q", err, tc.why)
			}

			var got bytes.Buffer
			var skipped []string
			skip := func(path string, err error) { skipped = append(skipped, path+": "+err.Error()) }
			if err := Export(context.Background(), dir, &got, ExportOptions{Skip: skip}); err != nil {
				t.Fatalf("Export with Skip: %v", err)
			}
			if len(skipped) != 1 || !strings.HasPrefix(skipped[0], bad+": ") || !strings.Contains(skipped[0], tc.why) {
				t.Errorf("skipped %q; want just %s, saying %q", skipped, bad, tc.why)
			}
			if d := cmp.Diff(want.String(), got.String()); d != "" {
				t.Errorf("export with a bad log differs from the good logs' export (-want +got):\n%s", d)
			}
		})
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
