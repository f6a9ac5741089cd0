package rules_test

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollcage/rollcage/normalize"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/rules/corpus"
)

// gateEngines are the policies the gate tests compare: each prefiltered
// and not.
var gatePolicies = []struct {
	name string
	dirs []string
}{
	{"default", nil},
	{"user", []string{"testdata/user", "testdata/extra"}},
}

type enginePair struct {
	name    string
	on, off *rules.Engine
}

func gateEngines(tb testing.TB) []enginePair {
	tb.Helper()
	var out []enginePair
	for _, p := range gatePolicies {
		on, err := rules.New(context.Background(), rules.Config{PolicyDirs: p.dirs})
		if err != nil {
			tb.Fatal(err)
		}
		off, err := rules.New(context.Background(), rules.Config{PolicyDirs: p.dirs, DisablePrefilter: true})
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, enginePair{p.name, on, off})
	}
	return out
}

// corpusLine is a line of monitor's labelled corpus with its task and
// sandbox decoded.
type corpusLine struct {
	corpus.Line
	task, sandbox any
}

func readCorpus(tb testing.TB) []corpusLine {
	tb.Helper()
	lines, contexts, err := corpus.ReadDir("testdata/corpus")
	if err != nil {
		tb.Fatal(err)
	}
	var out []corpusLine
	for _, l := range lines {
		cl := corpusLine{Line: l}
		tj, sj, ok := l.Facts(contexts)
		if !ok {
			tb.Fatalf("%s: task_ref %q not in the contexts", l.ID, l.TaskRef)
		}
		for _, x := range []struct {
			raw json.RawMessage
			dst *any
		}{{tj, &cl.task}, {sj, &cl.sandbox}} {
			if x.raw != nil {
				if err := json.Unmarshal(x.raw, x.dst); err != nil {
					tb.Fatal(err)
				}
			}
		}
		out = append(out, cl)
	}
	return out
}

// TestGatesSound checks every rule's gate, not only those whose whole
// package is gated by them: over the corpus, as episodes with their
// history, gated evaluation flags exactly what evaluating every rule
// flags, and each of those flags comes from a rule whose gate is open on
// the call. A literal a gate wrongly requires fails here.
func TestGatesSound(t *testing.T) {
	ctx := context.Background()
	lines := readCorpus(t)
	for _, ep := range gateEngines(t) {
		if n := ep.on.GateCount(); n < 50 && ep.name == "default" {
			t.Fatalf("%s policy: %d rules have a gate; the default bundle gates all of its rules", ep.name, n)
		}
		checked := 0
		stride := 1
		if rules.RaceEnabled() {
			stride = 8 // ten times slower under -race; the gates have no concurrency to check
		}
		for k, l := range lines {
			if k%stride != 0 {
				continue
			}
			cwd := cmp.Or(l.Cwd, "/workspace")
			on, off := ep.on.NewEpisode(ctx, l.task, l.sandbox), ep.off.NewEpisode(ctx, l.task, l.sandbox)
			var files normalize.Files
			for i, c := range append(slices.Clone(l.History), l.Call) {
				norm := normalize.Normalize(c, cwd, &files)
				files.Record(c, norm)
				want, err := off.Eval(ctx, c, norm)
				if err != nil {
					t.Fatal(err)
				}
				got, err := on.Eval(ctx, c, norm)
				if err != nil {
					t.Fatal(err)
				}
				if d := gocmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
					t.Errorf("%s policy, %s call %d (%.80q): gated flags differ (-every rule +gated):\n%s", ep.name, l.ID, i, norm.Raw, d)
				}
				for _, m := range on.GateMisses(norm, want) {
					t.Errorf("%s policy, %s call %d (%.80q): %s", ep.name, l.ID, i, norm.Raw, m)
				}
				checked += len(want)
				on.Record(c, norm, want, rules.Shown{})
				off.Record(c, norm, want, rules.Shown{})
			}
		}
		if checked < 150/stride {
			t.Errorf("%s policy: %d flags checked; the corpus no longer exercises the gates", ep.name, checked)
		}
	}
}
