package audit

import (
	"encoding/json"
	"fmt"

	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// eventEpisodes builds episodes from rollcage events as they are read,
// grouped by episode. Steps are keyed by the events' Step so that a
// decision or output finds its call even when events interleave. An
// episode is done at its episode_end (the last event of its log); done
// episodes are given on in order of first appearance.
type eventEpisodes struct {
	name  string
	order []*eventEpisode // not given on yet, in order of first appearance
	byID  map[string]*eventEpisode
	done  map[string]bool // given on
	held  int             // bytes of the events of order
}

type eventEpisode struct {
	ep    Trace
	steps map[int]int // step → index in ep.Steps
	size  int         // bytes of its events
	ended bool
}

func newEventEpisodes(name string) *eventEpisodes {
	return &eventEpisodes{name: name, byID: map[string]*eventEpisode{}, done: map[string]bool{}}
}

// add reads one event of size bytes.
func (b *eventEpisodes) add(ev trajectory.Event, size int) error {
	if b.done[ev.EpisodeID] {
		return fmt.Errorf("a %s event of episode %s after its episode_end", ev.Type, ev.EpisodeID)
	}
	e := b.byID[ev.EpisodeID]
	if e == nil {
		e = &eventEpisode{ep: Trace{ID: ev.EpisodeID, Source: b.name, Format: FormatRollcage, Online: &Online{}}, steps: map[int]int{}}
		b.byID[ev.EpisodeID] = e
		b.order = append(b.order, e)
	}
	e.size += size
	b.held += size
	ep, idx := &e.ep, e.steps
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
			return nil
		}
		var call toolcall.Call
		if json.Unmarshal(tc.Call, &call) != nil {
			return nil
		}
		idx[ev.Step] = len(ep.Steps)
		ep.Steps = append(ep.Steps, Step{Call: call})
	case trajectory.TypeDecision:
		var d trajectory.Decision
		if ev.Decode(&d) != nil {
			return nil
		}
		s := step()
		if s == nil { // a decision without its call (e.g. the submit-time tampering check)
			if len(d.Flags) == 0 {
				return nil
			}
			var call toolcall.Call
			if json.Unmarshal(d.Call, &call) != nil {
				call = toolcall.Call{Tool: "check"}
			}
			ep.Steps = append(ep.Steps, Step{Call: call, Recorded: &d, Original: "post-episode check"})
			return nil
		}
		if s.Recorded != nil { // a second decision on the step: the submit check
			var call toolcall.Call
			_ = json.Unmarshal(d.Call, &call)
			ep.Steps = append(ep.Steps, Step{Call: call, Recorded: &d, Original: "post-episode check"})
			return nil
		}
		s.Recorded = &d
		if d.Hack {
			ep.Online.Hacked = true
		}
	case trajectory.TypeToolOutput:
		var out trajectory.ToolOutput
		if ev.Decode(&out) != nil {
			return nil
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
	if ev.Type == trajectory.TypeEpisodeEnd {
		e.ended = true
	}
	return nil
}

// sized is an episode and the bytes it was read from.
type sized struct {
	ep   Trace
	size int
}

// finished takes the episodes done, up to the first that is not.
func (b *eventEpisodes) finished() []sized {
	n := 0
	for n < len(b.order) && b.order[n].ended {
		n++
	}
	return b.take(n)
}

// rest takes every episode not yet taken.
func (b *eventEpisodes) rest() []sized { return b.take(len(b.order)) }

func (b *eventEpisodes) take(n int) []sized {
	var out []sized
	for _, e := range b.order[:n] {
		out = append(out, sized{e.ep, e.size})
		b.held -= e.size
		b.done[e.ep.ID] = true
		delete(b.byID, e.ep.ID)
	}
	b.order = b.order[n:]
	return out
}
