package judge

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// historyOf returns the text between the history markers of the default
// user prompt.
func historyOf(t *testing.T, user string) string {
	t.Helper()
	_, rest, ok := strings.Cut(user, "<history>\n")
	if !ok {
		t.Fatalf("no <history> in prompt:\n%s", user)
	}
	h, _, ok := strings.Cut(rest, "</history>")
	if !ok {
		t.Fatalf("no </history> in prompt")
	}
	return h
}

func TestJudgeHistoryBudget(t *testing.T) {
	steps := make([]Step, 100)
	for i := range steps {
		steps[i] = Step{Call: fmt.Sprintf("step-%02d: cat file%d.py", i, i), Output: strings.Repeat("x", 200), Flags: []string{"tests.read"}}
	}
	huge := []Step{{Call: "cat big.log", Output: "HEAD" + strings.Repeat("y", 50000) + "TAIL"}}
	tests := []struct {
		name        string
		budget      int
		history     []Step
		wantIn      []string
		wantOut     []string
		wantOmitted string // "": the prompt says no step was omitted
	}{
		{"newest kept", 1000, steps, []string{"step-99", "step-96"}, []string{"step-00", "step-50"}, "older steps omitted"},
		{"default budget", 0, steps, []string{"step-99", "step-80"}, []string{"step-00"}, "older steps omitted"},
		{"one huge step is cut in the middle", 1000, huge, []string{"$ cat big.log", "[...]", "TAIL"}, nil, ""},
		{"no history", -1, steps, nil, []string{"step-"}, "100 older steps omitted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, answer(verdictJSON(false, "none", 0.9, "ok")))
			cfg := srv.config()
			cfg.HistoryBudget = tc.budget
			o := newJudge(t, cfg)
			req := testRequest("ep1", 0)
			req.History = tc.history
			if _, err := o.Judge(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			user := srv.reqs()[0].message("user")
			h := historyOf(t, user)
			budget := tc.budget
			if budget == 0 {
				budget = DefaultHistoryBudget
			}
			if budget < 0 {
				budget = 0
			}
			if len(h) > budget {
				t.Errorf("history is %d characters, budget %d", len(h), budget)
			}
			if budget > 0 && len(tc.history) > 1 && len(h) < budget*3/4 {
				t.Errorf("history is %d characters, want the budget %d mostly used", len(h), budget)
			}
			for _, s := range tc.wantIn {
				if !strings.Contains(h, s) {
					t.Errorf("history lacks %q", s)
				}
			}
			for _, s := range tc.wantOut {
				if strings.Contains(h, s) {
					t.Errorf("history has %q, which is older than the budget allows", s)
				}
			}
			switch {
			case tc.wantOmitted == "" && strings.Contains(user, "steps omitted"):
				t.Errorf("prompt says steps were omitted; every step was kept:\n%s", user)
			case !strings.Contains(user, tc.wantOmitted):
				t.Errorf("prompt does not say %q", tc.wantOmitted)
			}
		})
	}
}

func TestTrimHistory(t *testing.T) {
	steps := []Step{{Call: "a", Output: "1"}, {Call: "b", Output: "2"}, {Call: "c", Output: "3", Flags: []string{"r1", "r2"}}}
	tests := []struct {
		budget      int
		wantText    string
		wantKept    int
		wantOmitted int
	}{
		{100, "$ a\n1\n$ b\n2\n$ c\n3\n[flagged: r1, r2]\n", 3, 0},
		{30, "$ b\n2\n$ c\n3\n[flagged: r1, r2]\n", 2, 1},
		{24, "$ c\n3\n[flagged: r1, r2]\n", 1, 2},
		{10, "$\n[...]\n]\n", 1, 2},
		{0, "", 0, 3},
	}
	for _, tc := range tests {
		kept, text, omitted := trimHistory(steps, tc.budget)
		if text != tc.wantText || len(kept) != tc.wantKept || omitted != tc.wantOmitted {
			t.Errorf("trimHistory(budget %d) = %d kept, %q, %d omitted; want %d, %q, %d",
				tc.budget, len(kept), text, omitted, tc.wantKept, tc.wantText, tc.wantOmitted)
		}
	}
}

func TestPromptOverride(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "system.tmpl"), []byte("CUSTOM SYSTEM: {{len .Categories}} categories, answer JSON."), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := newFakeServer(t, answer(verdictJSON(false, "none", 0.9, "ok")))
	cfg := srv.config()
	cfg.PromptDir = dir
	o := newJudge(t, cfg)
	if _, err := o.Judge(t.Context(), testRequest("ep1", 0)); err != nil {
		t.Fatal(err)
	}
	r := srv.reqs()[0]
	if diff := cmp.Diff(fmt.Sprintf("CUSTOM SYSTEM: %d categories, answer JSON.", len(Categories)), r.message("system")); diff != "" {
		t.Errorf("system prompt (-want +got):\n%s", diff)
	}
	// user.tmpl was not overridden: the embedded one is used.
	if !strings.Contains(r.message("user"), "The call under review:") {
		t.Errorf("user prompt is not the embedded template:\n%s", r.message("user"))
	}

	// A broken override is reported when the judge is made, not per call.
	if err := os.WriteFile(filepath.Join(dir, "user.tmpl"), []byte("{{.Nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewOpenAI(cfg); err == nil || !strings.Contains(err.Error(), "user.tmpl") {
		t.Errorf("NewOpenAI with a broken user.tmpl: err = %v, want a parse error naming it", err)
	}
	// An unknown field fails at render time, which Judge reports as an error.
	if err := os.WriteFile(filepath.Join(dir, "user.tmpl"), []byte("{{.NoSuchField}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	o = newJudge(t, cfg)
	if _, err := o.Judge(t.Context(), testRequest("ep1", 0)); err == nil {
		t.Errorf("Judge with a template naming an unknown field: want an error")
	}
}

func TestParseSample(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    sample
		wantErr string
	}{
		{"plain", `{"hack":true,"category":"network_fetch","confidence":0.8,"rationale":"fetches the fix"}`, sample{true, "network_fetch", 0.8, "fetches the fix"}, ""},
		{"fenced", "```json\n{\"hack\":false,\"category\":\"none\",\"confidence\":0.9,\"rationale\":\"reads docs\"}\n```", sample{false, "", 0.9, "reads docs"}, ""},
		{"prose with brace in string", `Verdict: {"hack":false,"category":"","confidence":1,"rationale":"uses {} and \"quotes\""} done`, sample{false, "", 1, `uses {} and "quotes"`}, ""},
		{"nested object", `{"hack":true,"category":"test_tampering","confidence":0.5,"rationale":"r","extra":{"a":1}}`, sample{true, "test_tampering", 0.5, "r"}, ""},
		{"no object", "I think it is fine.", sample{}, "no JSON object"},
		{"unbalanced", `{"hack": true, "category": "x"`, sample{}, "no JSON object"},
		{"confidence > 1", `{"hack":true,"category":"x","confidence":80,"rationale":"r"}`, sample{}, "outside [0, 1]"},
		{"confidence < 0", `{"hack":true,"category":"x","confidence":-0.1,"rationale":"r"}`, sample{}, "outside [0, 1]"},
		{"hack as string", `{"hack":"yes","category":"x","confidence":0.5,"rationale":"r"}`, sample{}, "malformed verdict"},
		{"missing rationale", `{"hack":false,"category":"none","confidence":0.5}`, sample{}, "rationale missing"},
		{"hack without category", `{"hack":true,"category":"none","confidence":0.5,"rationale":"r"}`, sample{}, "without a category"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSample(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(sample{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestElideKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", 100) // two bytes each
	for n := 8; n < 60; n++ {
		got := elide(s, n)
		if len(got) > n || !utf8.ValidString(got) {
			t.Errorf("elide(%d) = %q (%d bytes, valid %v)", n, got, len(got), utf8.ValidString(got))
		}
	}
}

// TestPromptShowsProvenance: the files the agent created reach the prompt
// beside the instruction, so the judge can tell its own scratch tests
// from the repository's.
func TestPromptShowsProvenance(t *testing.T) {
	srv := newFakeServer(t, answer(verdictJSON(false, "none", 0.9, "ok")))
	o := newJudge(t, srv.config())
	req := testRequest("ep1", 0)
	req.Created = []string{"/workspace/test_repro_fill.py (step 3)"}
	if _, err := o.Judge(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	user := srv.reqs()[0].message("user")
	for _, want := range []string{req.Instruction, "/workspace/test_repro_fill.py (step 3)"} {
		if !strings.Contains(user, want) {
			t.Errorf("prompt lacks %q:\n%s", want, user)
		}
	}
}
