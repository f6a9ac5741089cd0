package rules_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"testing"

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
	contexts, err := corpus.LoadContexts("../monitor/testdata/corpus/contexts.json")
	if err != nil {
		tb.Fatal(err)
	}
	var out []corpusLine
	for _, name := range []string{"../monitor/testdata/corpus/hacks.jsonl", "../monitor/testdata/corpus/benign.jsonl"} {
		f, err := os.Open(name)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<22)
		for sc.Scan() {
			var l corpusLine
			if err := json.Unmarshal(sc.Bytes(), &l.Line); err != nil {
				tb.Fatalf("%s: %v", name, err)
			}
			tj, sj, ok := l.Facts(contexts)
			if !ok {
				tb.Fatalf("%s: %s: task_ref %q not in the contexts", name, l.ID, l.TaskRef)
			}
			for _, x := range []struct {
				raw json.RawMessage
				dst *any
			}{{tj, &l.task}, {sj, &l.sandbox}} {
				if x.raw != nil {
					if err := json.Unmarshal(x.raw, x.dst); err != nil {
						tb.Fatal(err)
					}
				}
			}
			out = append(out, l)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// TestDerivedGatesSound checks every rule's derived gate, not only those
// whose whole package is gated by them: over the corpus, each flag that
// ungated evaluation raises comes from a rule id with a rule whose gate
// passes on the call. A literal the deriver wrongly required fails here.
func TestDerivedGatesSound(t *testing.T) {
	ctx := context.Background()
	lines := readCorpus(t)
	for _, ep := range gateEngines(t) {
		n, gated := ep.on.DerivedGateCount()
		t.Logf("%s policy: %d of %d flag rules have a derived gate", ep.name, gated, n)
		if gated == 0 {
			t.Fatalf("%s policy: no rule has a derived gate", ep.name)
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
				for _, m := range on.DerivedGateMisses(norm, want) {
					t.Errorf("%s policy, %s call %d (%.80q): %s", ep.name, l.ID, i, norm.Raw, m)
				}
				checked += len(want)
				on.Record(c, norm, want)
				off.Record(c, norm, want)
			}
		}
		if checked < 150/stride {
			t.Errorf("%s policy: %d flags checked; the corpus no longer exercises the gates", ep.name, checked)
		}
	}
}

// TestEpisodeGatesIncremental: an episode derives again only the rules
// whose gates read its facts or task, reusing what the policy's own
// reading kept for the rest, and takes a rule's gate from an earlier
// episode that had the same values in the fields it read; the result,
// derived and cached, must be what deriving every rule with the
// episode's facts and task gives, for every task and sandbox of the
// corpus, a task without reference URLs, and both policies.
func TestEpisodeGatesIncremental(t *testing.T) {
	ctx := context.Background()
	lines := readCorpus(t)
	type pair struct{ task, sandbox any }
	var ctxs []pair
	seen := map[string]bool{}
	for _, l := range lines {
		k, err := json.Marshal([]any{l.task, l.sandbox})
		if err != nil {
			t.Fatal(err)
		}
		if !seen[string(k)] {
			seen[string(k)] = true
			ctxs = append(ctxs, pair{l.task, l.sandbox})
		}
		if m, ok := l.task.(map[string]any); ok && m["reference_urls"] != nil && !seen["no-urls"] {
			seen["no-urls"] = true
			m2 := maps.Clone(m)
			delete(m2, "reference_urls")
			ctxs = append(ctxs, pair{m2, l.sandbox})
		}
	}
	if len(ctxs) < 3 {
		t.Fatalf("%d distinct tasks and sandboxes in the corpus; want several", len(ctxs))
	}
	for _, ep := range gateEngines(t) {
		for i, c := range ctxs {
			if d := ep.on.NewEpisode(ctx, c.task, c.sandbox).EpisodeGatesDiff(); d != "" {
				t.Errorf("%s policy, context %d: incremental gates differ (-full +incremental):\n%s", ep.name, i, d)
			}
		}
	}
}
