package rules

import (
	"fmt"
	"slices"

	gocmp "github.com/google/go-cmp/cmp"
)

// DerivedGateMisses checks the derived gates against flags that fired on
// a call: every flag's rule id must belong to a flag rule whose gate passes
// on the call (or that has none). It returns one line per flag that no such
// rule explains. A call the gates do not read (base64 in it, an odd
// shape) explains every flag.
func (ep *EpisodeEval) DerivedGateMisses(normalized any, flags []Flag) []string {
	pre := ep.eng.pre
	if pre == nil {
		return nil
	}
	n, err := toValue(normalized)
	if err != nil {
		return nil
	}
	gs := ep.gateSet()
	_, _, _, marks := ep.snapshot()
	sc := ep.gates.scan(typed(normalized, n), gs, marks...)
	if sc == nil {
		return nil
	}
	var miss []string
	for _, f := range flags {
		ok := false
		for _, id := range []string{f.Rule, ""} {
			for _, g := range gs.byID[id] {
				if g == nil || allClauses(g, sc.found) {
					ok = true
				}
			}
		}
		if !ok && len(gs.byID[f.Rule]) > 0 {
			miss = append(miss, fmt.Sprintf("%s (evidence %q): no rule with this id passes its derived gate", f.Rule, f.Evidence))
		}
	}
	return miss
}

// DerivedGateCount is how many flag rules the policy has and how many of
// them got a derived gate.
func (e *Engine) DerivedGateCount() (rules, gated int) {
	if e.pre == nil {
		return 0, 0
	}
	return e.pre.static.rules, e.pre.static.gated
}

// RaceEnabled: the tests run under the race detector.
func RaceEnabled() bool { return raceEnabled }

// EpisodeGatesDiff compares the episode's gates, derived again only for
// the rules that read its facts or task, with every rule derived with
// them: "" when they are the same.
func (ep *EpisodeEval) EpisodeGatesDiff() string {
	pre := ep.eng.pre
	if pre == nil || ep.facts == nil {
		return ""
	}
	want := deriveEpisodeGates(ep.eng.compiler, ep.facts, ep.task)
	norm := func(dg derivedGates) derivedGates {
		dg.lits = slices.Compact(slices.Sorted(slices.Values(dg.lits)))
		return dg
	}
	p := pre.plan
	fresh := &gatePlan{c: p.c, rules: p.rules, ungated: p.ungated, featRefs: p.featRefs, memo: p.memo}
	derived, _ := fresh.episode(ep.facts, ep.task) // every episodic rule derived
	cached, _ := p.episode(ep.facts, ep.task)      // from the engine's cache, filled by earlier episodes
	for _, got := range []struct {
		name string
		dg   derivedGates
	}{{"derived", derived.gates()}, {"cached", cached.gates()}} {
		if d := gocmp.Diff(norm(want), norm(got.dg), gocmp.AllowUnexported(derivedGates{})); d != "" {
			return got.name + ":\n" + d
		}
	}
	return ""
}
