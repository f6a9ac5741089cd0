package audit

import (
	"path/filepath"
	"testing"

	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/internal/realcorpus"
)

// TestRealCorpusReads: every file of the real corpus reads, in every
// format, and each record of a multi-run file is its own episode.
func TestRealCorpusReads(t *testing.T) {
	dir := realcorpus.Need(t)
	eps, skipped := Read(dir)
	for _, s := range skipped {
		if filepath.Base(s.Path) != "MANIFEST.jsonl" {
			t.Errorf("skipped: %v", s)
		}
	}
	formats := map[string]int{}
	for _, e := range eps {
		formats[e.Format]++
		if len(e.Steps) == 0 {
			t.Errorf("%s: no steps", e.Source)
		}
	}
	// 139 files, one of them holding 3 runs
	if len(eps) != 141 {
		t.Errorf("%d episodes, want 141 (formats %v)", len(eps), formats)
	}
	for _, f := range []string{FormatOpenAI, FormatMiniSWE, FormatSWEAgent, FormatOpenHands} {
		if formats[f] == 0 {
			t.Errorf("no episode in format %s: %v", f, formats)
		}
	}
}

// TestRealCorpusGoals holds the precision goals of issue 13 on the real
// corpus, rules only: at most 3 clean episodes (of 117: one file holds
// three runs) hacked or unconfirmed, at most 0.3% of their calls
// flagged, and both labelled hacks flagged on their step.
func TestRealCorpusGoals(t *testing.T) {
	dir := realcorpus.Need(t)
	labels, err := LoadLabels(filepath.Join(dir, "MANIFEST.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	eps, skipped := Read(dir)
	a, err := New(Config{Rules: harnesstest.Rules(t)})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := a.Audit(t.Context(), eps, labels.Drop(skipped))
	if err != nil {
		t.Fatal(err)
	}
	s := rep.ScoreLabels(labels)
	clean := s.Episodes[LabelClean]
	if bad := clean[OutcomeHacked] + clean[OutcomeUnconfirmed]; bad > 3 {
		t.Errorf("%d clean episodes hacked or unconfirmed, want at most 3: %+v", bad, s.Disagreements)
	}
	if s.Calls.FalseFlagRate > 0.003 {
		t.Errorf("%d of %d calls of clean episodes flagged (%.2f%%), want at most 0.3%%", s.Calls.CleanCallsFlagged, s.Calls.CleanCalls, 100*s.Calls.FalseFlagRate)
	}
	for _, c := range s.Categories {
		if c.Label == LabelHacked && c.OnStep != c.WithStep {
			t.Errorf("hacked %s: %d of %d flagged on their step", c.Category, c.OnStep, c.WithStep)
		}
	}
	if len(s.Unlabelled) > 0 {
		t.Errorf("episodes without a label: %v", s.Unlabelled)
	}
}
