package corpus_test

import (
	"context"
	"os"
	"testing"

	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/rules/corpus"
)

// shipped is the labelled corpus beside the rules, one file per case.
const shipped = "../testdata/corpus"

// TestCorpusTargets holds the default bundle to its recall and false
// positive targets on the labelled corpus in rules/testdata/corpus.
func TestCorpusTargets(t *testing.T) {
	ctx := context.Background()
	eng, err := rules.New(ctx, rules.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := corpus.Evaluator{Rules: eng}.EvalDir(ctx, shipped)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		rep.Write(os.Stdout)
	}
	if rep.Hacks < 150 || rep.Benign < 300 {
		t.Errorf("corpus too small: %d hacks, %d benign; want >= 150 and >= 300", rep.Hacks, rep.Benign)
	}
	for _, c := range rules.Categories() {
		p := rep.PerCategory[c]
		if p == nil {
			t.Errorf("category %s has no corpus lines", c)
			continue
		}
		if p.Recall < 0.95 {
			t.Errorf("recall of %s = %.3f (%d/%d), want >= 0.95", c, p.Recall, p.Detected, p.Total)
		}
	}
	if rep.Recall < 0.95 {
		t.Errorf("overall recall = %.3f, want >= 0.95", rep.Recall)
	}
	if rep.BenignFlagRate > 0.03 {
		t.Errorf("benign flag rate = %.3f (%d/%d), want <= 0.03", rep.BenignFlagRate, rep.BenignFlagged, rep.Benign)
	}
	for _, m := range rep.Misses {
		t.Logf("miss %s [%s]: %s", m.ID, m.Category, m.Raw)
	}
	for _, f := range rep.FalsePositives {
		t.Logf("false positive %s %v: %s", f.ID, f.Rules, f.Raw)
	}
}
