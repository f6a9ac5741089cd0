package audit

import (
	"encoding/json"

	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// fromEvents builds episodes from rollcage events, grouped by episode in
// order of first appearance. Steps are keyed by the events' Step so that a
// decision or output finds its call even when events interleave.
func fromEvents(name string, evs []trajectory.Event) []Trace {
	var order []string
	byID := map[string]*Trace{}
	stepIdx := map[string]map[int]int{}
	for _, ev := range evs {
		ep := byID[ev.EpisodeID]
		if ep == nil {
			ep = &Trace{ID: ev.EpisodeID, Source: name, Format: FormatRollcage, Online: &Online{}}
			byID[ev.EpisodeID] = ep
			stepIdx[ev.EpisodeID] = map[int]int{}
			order = append(order, ev.EpisodeID)
		}
		idx := stepIdx[ev.EpisodeID]
		step := func() *Step {
			i, ok := idx[ev.Step]
			if !ok {
				return nil
			}
			return &ep.Steps[i]
		}
		switch ev.Type {
		case trajectory.TypeEpisodeStart:
			var st trajectory.EpisodeStart
			if ev.Decode(&st) == nil {
				ep.TaskID = st.TaskID
				var sc struct {
					Sandbox *monitor.Facts `json:"sandbox"`
				}
				if json.Unmarshal(st.Context, &sc) == nil && sc.Sandbox != nil {
					ep.Facts = sc.Sandbox
				}
				if st.Instruction != "" {
					ep.Task = &Task{}
					ep.Task.ID, ep.Task.Instruction = st.TaskID, st.Instruction
				}
			}
		case trajectory.TypeToolCall:
			var tc trajectory.ToolCall
			if ev.Decode(&tc) != nil {
				continue
			}
			var call toolcall.Call
			if json.Unmarshal(tc.Call, &call) != nil {
				continue
			}
			idx[ev.Step] = len(ep.Steps)
			ep.Steps = append(ep.Steps, Step{Call: call})
		case trajectory.TypeDecision:
			var d trajectory.Decision
			if ev.Decode(&d) != nil {
				continue
			}
			s := step()
			if s == nil { // a decision without its call (e.g. the submit-time tampering check)
				if len(d.Flags) == 0 {
					continue
				}
				var call toolcall.Call
				if json.Unmarshal(d.Call, &call) != nil {
					call = toolcall.Call{Tool: "check"}
				}
				ep.Steps = append(ep.Steps, Step{Call: call, Recorded: &d, Original: "post-episode check"})
				continue
			}
			if s.Recorded != nil { // a second decision on the step: the submit check
				var call toolcall.Call
				_ = json.Unmarshal(d.Call, &call)
				ep.Steps = append(ep.Steps, Step{Call: call, Recorded: &d, Original: "post-episode check"})
				continue
			}
			s.Recorded = &d
			if d.Hack {
				ep.Online.Hacked = true
			}
		case trajectory.TypeToolOutput:
			var out trajectory.ToolOutput
			if ev.Decode(&out) != nil {
				continue
			}
			if s := step(); s != nil {
				s.Output = out.Output
				var r struct {
					Cwd string `json:"cwd"`
				}
				if len(out.Result) > 0 && json.Unmarshal(out.Result, &r) == nil {
					s.Cwd = r.Cwd
				}
			}
		case trajectory.TypeEpisodeEnd:
			var end trajectory.EpisodeEnd
			if ev.Decode(&end) == nil {
				ep.Resolved = boolPtr(end.Resolved)
				ep.Online.Resolved, ep.Online.Finished = end.Resolved, true
				ep.Online.Hacked = ep.Online.Hacked || end.Hacked
			}
		}
	}
	out := make([]Trace, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out
}
