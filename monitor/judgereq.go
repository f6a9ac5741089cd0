package monitor

import (
	"encoding/json"
	"slices"

	"github.com/rollcage/rollcage/judge"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/toolcall"
)

// JudgeRequest is what the judge is asked about one flagged call of
// episode episodeID: the task's instruction and what it protects, the
// call as made and as normalized, the rules' flags, and the newest
// histMax of the episode's earlier steps (hist, oldest first, is not
// kept). The online monitor and the offline audit both ask this way, so
// a judge sees the same request for the same call in either.
func JudgeRequest(tc TaskContext, episodeID string, call toolcall.Call, n toolcall.Normalized, flags []rules.Flag, hist []judge.Step, histMax int) judge.Request {
	callJSON, _ := json.Marshal(call)
	normJSON, _ := json.Marshal(n)
	fl := make([]judge.Flag, len(flags))
	for i, f := range flags {
		fl[i] = judge.Flag(f)
	}
	protected := append(append([]string(nil), tc.ProtectedPaths...), tc.ReferenceURLs...)
	if tc.UpstreamFixRef != "" {
		protected = append(protected, "commit "+tc.UpstreamFixRef+" (upstream fix) and every commit not an ancestor of "+tc.BaseCommit)
	}
	if k := len(hist) - histMax; k > 0 {
		hist = hist[k:]
	}
	return judge.Request{
		EpisodeID: episodeID, TaskID: tc.ID, Instruction: tc.Instruction,
		Protected: protected, Call: callJSON, Normalized: normJSON,
		Flags: fl, History: slices.Clone(hist),
	}
}

// Shown is what the judge will be shown of a call once it is in the
// episode's history (rules.EpisodeEval.Record): the call on one line and
// the start of its output.
func Shown(call toolcall.Call, n toolcall.Normalized, output string) rules.Shown {
	shown := call.Tool + " " + clip(n.Raw, 400)
	if call.Tool == toolcall.Bash {
		shown = "$ " + clip(n.Raw, 400)
	}
	return rules.Shown{Call: shown, Output: clip(output, 600)}
}

// JudgeSteps is the history (rules.EpisodeEval.Recent) as the judge's
// request carries it.
func JudgeSteps(hist []rules.Shown) []judge.Step {
	steps := make([]judge.Step, len(hist))
	for i, h := range hist {
		steps[i] = judge.Step{Call: h.Call, Output: h.Output, Flags: h.Rules}
	}
	return steps
}

// TopFlag is the flag that decides among flags (at least one): certain
// before suspicious, then by the category whose failure the policy would
// see first (a curl of a reference URL piped into git apply fails at the
// network).
func TopFlag(flags []rules.Flag) rules.Flag {
	best := flags[0]
	for _, f := range flags[1:] {
		if rank(f) < rank(best) {
			best = f
		}
	}
	return best
}

var categoryOrder = []string{rules.CatNetwork, rules.CatProtected, rules.CatHistory, rules.CatProbing,
	rules.CatTampering, rules.CatEvaluator, rules.CatSpecialCase, rules.CatChained}

func rank(f rules.Flag) int {
	r := len(categoryOrder)
	for i, c := range categoryOrder {
		if c == f.Category {
			r = i
		}
	}
	if f.Severity != rules.Certain {
		r += 100
	}
	return r
}
