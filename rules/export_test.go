package rules

import "fmt"

// raceEnabled: the tests run under the race detector (race_test.go).
var raceEnabled bool

// RaceEnabled: the tests run under the race detector.
func RaceEnabled() bool { return raceEnabled }

// GateMisses checks the gates against flags that fired on a call: the
// gate of every flag's rule must be open on it. It returns one line per
// flag whose rule's gate is shut. A call the gates do not read (base64 in
// it, an odd shape) explains every flag.
func (ep *EpisodeEval) GateMisses(normalized any, flags []Flag) []string {
	gt := ep.eng.gating
	if gt == nil {
		return nil
	}
	n := typed(normalized)
	if n == nil {
		v, err := toValue(normalized)
		if err != nil {
			return nil
		}
		n = typedValue(v)
	}
	h := ep.gateHistory()
	r := gt.set.Open(n, ep.gate, h)
	if r == nil {
		return nil
	}
	open := r.Open
	var miss []string
	for _, f := range flags {
		for i, id := range gt.ids {
			if id == f.Rule && !open[i] {
				miss = append(miss, fmt.Sprintf("%s (evidence %q): its gate is shut on the call", f.Rule, f.Evidence))
			}
		}
	}
	return miss
}

// GateCount is how many flag rule ids the policy has a gate for.
func (e *Engine) GateCount() int {
	if e.gating == nil {
		return 0
	}
	return len(e.gating.ids)
}
