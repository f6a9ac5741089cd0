package trajectory

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
)

// ATIFVersion is the schema_version of the ATIF trajectories Export
// writes: Harbor's Agent Trajectory Interchange Format (RFC 0001).
const ATIFVersion = "ATIF-v1.6"

// ATIFTrajectory is one ATIF document. Field names and shapes are the
// RFC's; rollcage's own facts (episode, reward, label, ...) sit in Extra.
type ATIFTrajectory struct {
	SchemaVersion string            `json:"schema_version"`
	SessionID     string            `json:"session_id"`
	Agent         ATIFAgent         `json:"agent"`
	Steps         []ATIFStep        `json:"steps"`
	Notes         string            `json:"notes,omitempty"`
	FinalMetrics  *ATIFFinalMetrics `json:"final_metrics,omitempty"`
	// ContinuedTrajectoryRef names the trajectory this one continues in
	// (the next chain of the episode: a compaction or a rewritten
	// history): its session_id, the line that holds it in the export.
	ContinuedTrajectoryRef string         `json:"continued_trajectory_ref,omitempty"`
	Extra                  map[string]any `json:"extra,omitempty"`
}

// ATIFAgent is the RFC's AgentSchema.
type ATIFAgent struct {
	Name            string          `json:"name"`
	Version         string          `json:"version"`
	ModelName       string          `json:"model_name,omitempty"`
	ToolDefinitions json.RawMessage `json:"tool_definitions,omitempty"`
}

// ATIFStep is the RFC's StepObject.
type ATIFStep struct {
	StepID          int              `json:"step_id"`
	Timestamp       string           `json:"timestamp,omitempty"`
	Source          string           `json:"source"` // system, user, agent
	ModelName       string           `json:"model_name,omitempty"`
	Message         string           `json:"message"`
	ToolCalls       []ATIFToolCall   `json:"tool_calls,omitempty"`
	Observation     *ATIFObservation `json:"observation,omitempty"`
	Metrics         *ATIFMetrics     `json:"metrics,omitempty"`
	IsCopiedContext bool             `json:"is_copied_context,omitempty"`
	Extra           map[string]any   `json:"extra,omitempty"`
}

// ATIFToolCall is the RFC's ToolCallSchema; Arguments is a JSON object.
type ATIFToolCall struct {
	ToolCallID   string          `json:"tool_call_id"`
	FunctionName string          `json:"function_name"`
	Arguments    json.RawMessage `json:"arguments"`
}

// ATIFObservation is the RFC's ObservationSchema.
type ATIFObservation struct {
	Results []ATIFResult `json:"results"`
}

// ATIFResult is the RFC's ObservationResultSchema.
type ATIFResult struct {
	SourceCallID string `json:"source_call_id,omitempty"`
	Content      string `json:"content"`
}

// ATIFMetrics is the RFC's MetricsSchema.
type ATIFMetrics struct {
	PromptTokens       int            `json:"prompt_tokens,omitempty"`
	CompletionTokens   int            `json:"completion_tokens,omitempty"`
	PromptTokenIDs     []int64        `json:"prompt_token_ids,omitempty"`
	CompletionTokenIDs []int64        `json:"completion_token_ids,omitempty"`
	Logprobs           []float64      `json:"logprobs,omitempty"`
	Extra              map[string]any `json:"extra,omitempty"`
}

// ATIFFinalMetrics is the RFC's FinalMetricsSchema.
type ATIFFinalMetrics struct {
	TotalPromptTokens     int `json:"total_prompt_tokens"`
	TotalCompletionTokens int `json:"total_completion_tokens"`
	TotalSteps            int `json:"total_steps"`
}

// ATIF turns one finished episode into ATIF trajectories: one per chain
// of model turns (see Samples), each continued in the next by
// continued_trajectory_ref, or one for an episode of tool calls alone.
// A chain's steps are its last request's messages and response: system
// and user messages as system and user steps, assistant messages as agent
// steps with their tool calls and, as observation, the tool messages that
// answer them. An agent step the chain's turns produced carries that
// turn's metrics (token counts, prompt and completion ids, logprobs as
// served); an assistant message from before the chain is marked
// is_copied_context. It returns none for an unfinished episode.
// Auxiliary turns (see AuxClient) are left out. Their extra's
// training_reward is the default RewardPolicy's.
func ATIF(evs []Event) ([]ATIFTrajectory, error) {
	ts, _, err := atifOf(evs, ExportOptions{})
	return ts, err
}

// atifOf is ATIF with auxiliary turns as opts say (their chains come
// after the episode's own, with extra.auxiliary) and training rewards by
// opts.Reward; left is how many auxiliary turns it left out.
func atifOf(evs []Event, opts ExportOptions) (out []ATIFTrajectory, left int, err error) {
	ep, ok, err := readEpisode(evs)
	if err != nil || !ok {
		return nil, 0, err
	}
	ep.decide(opts.Reward)
	agent := ATIFAgent{Name: "rollcage", Version: buildVersion(), ModelName: ep.start.Model}
	if len(ep.turns) == 0 {
		if len(ep.steps) == 0 {
			return nil, 0, nil
		}
		t := ATIFTrajectory{SchemaVersion: ATIFVersion, SessionID: ep.id, Agent: agent,
			Notes: "a tool trajectory: the episode was driven through the gateway's tool calls alone, with no model turn recorded"}
		if ep.start.Instruction != "" {
			t.Steps = append(t.Steps, ATIFStep{Source: "user", Message: ep.start.Instruction})
		}
		for _, st := range ep.steps {
			id := st.ToolCallID
			if id == "" {
				id = fmt.Sprintf("step-%d", st.Step)
			}
			t.Steps = append(t.Steps, ATIFStep{Source: "agent",
				ToolCalls:   []ATIFToolCall{{ToolCallID: id, FunctionName: st.Tool, Arguments: argsObject(st.Args)}},
				Observation: &ATIFObservation{Results: []ATIFResult{{SourceCallID: id, Content: st.Output}}},
				Extra:       stepExtra(st)})
		}
		t.Extra = ep.atifExtra(KindToolTrajectory, 0, 0)
		out = append(out, numbered(t))
		return out, 0, nil
	}
	groups, left, err := ep.groups(GranularitySegment, opts.Auxiliary)
	if err != nil {
		return nil, 0, err
	}
	for ci, g := range groups {
		s := ep.sample(KindSegment, g)
		t := ATIFTrajectory{SchemaVersion: ATIFVersion, SessionID: ep.id, Agent: agent}
		if ci > 0 {
			t.SessionID = fmt.Sprintf("%s.%d", ep.id, ci)
		}
		t.Agent.ToolDefinitions = s.Tools
		own := map[int]turnRec{} // message index → the turn that produced it
		for _, tr := range g {
			own[len(tr.mt.Request)] = tr
		}
		fm := &ATIFFinalMetrics{}
		var cur *ATIFStep
		for i, m := range s.Messages {
			switch m.Role {
			case RoleTool:
				if cur == nil {
					t.Steps = append(t.Steps, ATIFStep{Source: "user", Message: m.Content, Extra: map[string]any{"role": RoleTool}})
					continue
				}
				r := ATIFResult{Content: m.Content}
				for _, tc := range cur.ToolCalls {
					if tc.ToolCallID == m.ToolCallID {
						r.SourceCallID = m.ToolCallID
					}
				}
				if cur.Observation == nil {
					cur.Observation = &ATIFObservation{}
				}
				cur.Observation.Results = append(cur.Observation.Results, r)
				continue
			case RoleAssistant:
				st := ATIFStep{Source: "agent", Message: m.Content}
				for _, tc := range m.ToolCalls {
					st.ToolCalls = append(st.ToolCalls, ATIFToolCall{ToolCallID: tc.ID, FunctionName: tc.Function.Name, Arguments: argsObject(tc.Function.Arguments)})
				}
				if tr, ok := own[i]; ok && s.MessageMask[i] == 1 {
					st.ModelName, st.Timestamp = tr.mt.Model, ep.turnTime[tr.index]
					st.Metrics = turnMetrics(tr.mt)
					fm.TotalPromptTokens += tr.mt.Usage.PromptTokens
					fm.TotalCompletionTokens += tr.mt.Usage.CompletionTokens
				} else {
					st.IsCopiedContext = true
				}
				t.Steps = append(t.Steps, st)
				cur = &t.Steps[len(t.Steps)-1]
				continue
			case RoleSystem:
				t.Steps = append(t.Steps, ATIFStep{Source: "system", Message: m.Content})
			default:
				t.Steps = append(t.Steps, ATIFStep{Source: "user", Message: m.Content})
			}
			cur = nil
		}
		// The last answer's calls ran too: their outputs, from the log.
		if cur != nil && cur.Observation == nil {
			for _, tc := range cur.ToolCalls {
				if o, ok := ep.outputs[tc.ToolCallID]; ok {
					if cur.Observation == nil {
						cur.Observation = &ATIFObservation{}
					}
					cur.Observation.Results = append(cur.Observation.Results, ATIFResult{SourceCallID: tc.ToolCallID, Content: o})
				}
			}
		}
		t.Extra = ep.atifExtra(KindSegment, int(s.Segment), int(s.Turn))
		t.Extra["tokens"] = s.Tokens
		if s.Summary != "" {
			t.Extra["summary"] = s.Summary
		}
		if s.Auxiliary != "" {
			t.Extra["auxiliary"] = s.Auxiliary
		}
		t = numbered(t)
		fm.TotalSteps = len(t.Steps)
		t.FinalMetrics = fm
		out = append(out, t)
	}
	for i := 0; i+1 < len(out); i++ {
		out[i].ContinuedTrajectoryRef = out[i+1].SessionID
	}
	return out, left, nil
}

func numbered(t ATIFTrajectory) ATIFTrajectory {
	for i := range t.Steps {
		t.Steps[i].StepID = i + 1
	}
	return t
}

func turnMetrics(mt ModelTurn) *ATIFMetrics {
	m := &ATIFMetrics{PromptTokens: mt.Usage.PromptTokens, CompletionTokens: mt.Usage.CompletionTokens,
		PromptTokenIDs: mt.PromptTokenIDs, CompletionTokenIDs: mt.TokenIDs, Logprobs: mt.Logprobs}
	extra := map[string]any{}
	if mt.FinishReason != "" {
		extra["finish_reason"] = mt.FinishReason
	}
	if len(mt.TopLogprobs) > 0 {
		extra["top_logprobs"] = mt.TopLogprobs
	}
	if len(mt.Tokens) > 0 {
		extra["tokens"] = mt.Tokens
	}
	if len(mt.Params) > 0 {
		extra["params"] = mt.Params
	}
	if len(extra) > 0 {
		m.Extra = extra
	}
	return m
}

func (ep episode) atifExtra(kind string, segment, turn int) map[string]any {
	o := ep.outcome
	x := map[string]any{
		"sample_id": sampleID(ep.id, kind, segment, turn), "episode_id": ep.id, "task_id": o.TaskID, "attempt": o.Attempt, "group_id": o.GroupID,
		"segment": segment, "reward": o.Reward, "training_reward": o.TrainingReward, "resolved": o.Resolved, "hacked": o.Hacked, "label": o.Label,
		"hack_categories": o.HackCategories, "blocked_steps": o.BlockedSteps, "failure_class": o.FailureClass,
	}
	if f := ep.start.Fork; f != nil {
		x["parent_episode_id"], x["branch_step"], x["prefix_turns"], x["fork_group_id"] = f.ParentEpisodeID, f.BranchStep, f.PrefixTurns, f.GroupID()
	}
	if in := ep.start.Instance; in != nil {
		x["instance"] = in
		if len(o.TestsStatus) > 0 {
			x["tests_status"] = o.TestsStatus
		}
	}
	return x
}

func stepExtra(st ToolStep) map[string]any {
	x := map[string]any{"step": st.Step, "action": st.Action, "exit_code": st.ExitCode}
	if st.Blocked {
		x["blocked"] = true
	}
	if st.Dummy {
		x["dummy"] = true
	}
	if st.Prefix {
		x["prefix"] = true
	}
	if st.Hack {
		x["hack"] = true
	}
	if st.Unconfirmed {
		x["unconfirmed"] = true
	}
	if len(st.Categories) > 0 {
		x["categories"] = st.Categories
	}
	return x
}

// argsObject is a call's arguments as the JSON object ATIF requires;
// arguments that are not one are kept as {"raw": "<text>"}.
func argsObject(args string) json.RawMessage {
	a := strings.TrimSpace(args)
	if a == "" {
		return json.RawMessage("{}")
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(a), &m) == nil && m != nil {
		return json.RawMessage(a)
	}
	b, _ := json.Marshal(map[string]string{"raw": args})
	return b
}

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
