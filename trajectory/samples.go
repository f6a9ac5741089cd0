package trajectory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
)

// Kinds of Sample.
const (
	KindSegment        = "segment"         // a chain of model turns (GranularitySegment)
	KindTurn           = "turn"            // one model turn (GranularityTurn)
	KindToolTrajectory = "tool_trajectory" // an episode driven without the model proxy: its calls only
)

// Token states of a Sample (Sample.Tokens).
const (
	// TokenIDsPresent: the server returned prompt and completion ids for
	// every turn of the sample; the token fields are filled.
	TokenIDsPresent = "present"
	// TokenIDsCompletionOnly: a one-turn sample whose server returned
	// completion ids but no prompt ids: CompletionTokenIDs, LossMask (all
	// 1) and Logprobs are filled, PromptTokenIDs is empty.
	TokenIDsCompletionOnly = "completion_only"
	// TokenIDsAbsent: some turn has no ids; the token fields are empty and
	// only the text (Messages) is there. Nothing is re-tokenized.
	TokenIDsAbsent = "absent"
	// TokenIDsUnavailable: as TokenIDsAbsent, because the model server
	// refused the request fields that ask for ids (a 400 naming them; see
	// ModelTurn.TokensUnavailable): serve it with a server that returns
	// them (vLLM's return_token_ids) to train token-exact.
	TokenIDsUnavailable = "unavailable"
)

// Sample is one training sample of a finished episode: one model turn,
// one chain of turns (a stretch where every prompt extends the previous
// prompt plus its completion), or an episode's tool trajectory.
//
// The token fields are exactly as served: PromptTokenIDs are the first
// turn's prompt; CompletionTokenIDs are everything after it in the
// chain's final sequence (each turn's completion, and between them the
// tokens the next prompt added: tool outputs, user messages, template
// framing). LossMask runs over PromptTokenIDs ++ CompletionTokenIDs: 1 on
// tokens the model generated, 0 on the prompt and the added tokens.
// Logprobs and TopLogprobs are parallel to CompletionTokenIDs (0 and
// empty on added tokens).
type Sample struct {
	// SampleID is "<episode_id>/<kind>/<segment>/<turn>": unique and the
	// same on every export.
	SampleID  string `json:"sample_id" parquet:"sample_id"`
	Kind      string `json:"kind" parquet:"kind"`
	EpisodeID string `json:"episode_id" parquet:"episode_id"`
	TaskID    string `json:"task_id" parquet:"task_id"`
	// Segment is the compaction segment of the sample; Turn the 0-based
	// index, among the episode's model turns, of its first turn; Turns how
	// many it holds.
	Segment int64 `json:"segment" parquet:"segment"`
	Turn    int64 `json:"turn" parquet:"turn"`
	Turns   int64 `json:"turns" parquet:"turns"`
	Attempt int64 `json:"attempt" parquet:"attempt"`
	// GroupID is the episode's group (GRPO-style: the attempts of one task
	// run together), "" when it had none.
	GroupID string `json:"group_id,omitempty" parquet:"group_id"`
	// Summary is the compaction summary that opened the segment ("" for
	// segment 0).
	Summary string `json:"summary,omitempty" parquet:"summary"`
	// ParentEpisodeID, BranchStep and ForkGroupID are set on a forked
	// episode's samples (BranchStep is null on a root's, 0 on a fork's
	// before any call): the episode it branched off, the parent's last
	// tool call before the branch, and the group of the siblings forked
	// off that parent at that step (ForkOrigin.GroupID; tree-GRPO's
	// group). PrefixTurns is how many of the sample's turns are that
	// shared prefix (their loss and message masks are 0); with PrefixOnce,
	// which leaves them out, it is on the child's first sample, whose
	// prompt holds them, and says how many there were.
	ParentEpisodeID string `json:"parent_episode_id,omitempty" parquet:"parent_episode_id"`
	BranchStep      *int64 `json:"branch_step,omitempty" parquet:"branch_step,optional"`
	ForkGroupID     string `json:"fork_group_id,omitempty" parquet:"fork_group_id"`
	PrefixTurns     int64  `json:"prefix_turns,omitempty" parquet:"prefix_turns"`
	// Auxiliary says why the sample's turns are not the episode's own
	// conversation (AuxClient, AuxNoTools, AuxSystemPrompt); such samples
	// are exported only when asked (ExportOptions.Auxiliary). "" on the
	// episode's own samples.
	Auxiliary string `json:"auxiliary,omitempty" parquet:"auxiliary"`

	// Messages (OpenAI format) are the last turn's request plus its
	// response. MessageMask is 1 on the assistant messages the sample's
	// turns produced, 0 on everything else (system, user, tool outputs,
	// the injected summary, assistant messages from before the sample);
	// MessageTokenIDs and MessageLogprobs are those messages' completion
	// ids and logprobs as served.
	Messages        []Message   `json:"messages" parquet:"messages,list"`
	MessageMask     []int32     `json:"message_mask" parquet:"message_mask,list"`
	MessageTokenIDs [][]int64   `json:"message_token_ids" parquet:"message_token_ids,list"`
	MessageLogprobs [][]float64 `json:"message_logprobs" parquet:"message_logprobs,list"`
	// Tools is the tools list the model saw and Params the sampling
	// parameters, both as sent with the last turn.
	Tools  json.RawMessage `json:"tools,omitempty" parquet:"tools,json,optional"`
	Params json.RawMessage `json:"params,omitempty" parquet:"params,json,optional"`

	Tokens             string         `json:"tokens" parquet:"tokens"` // TokenIDsPresent, TokenIDsCompletionOnly, TokenIDsAbsent, TokenIDsUnavailable
	PromptTokenIDs     []int64        `json:"prompt_token_ids" parquet:"prompt_token_ids,list"`
	CompletionTokenIDs []int64        `json:"completion_token_ids" parquet:"completion_token_ids,list"`
	LossMask           []int32        `json:"loss_mask" parquet:"loss_mask,list"`
	Logprobs           []float64      `json:"logprobs" parquet:"logprobs,list"`
	TopLogprobs        [][]TopLogprob `json:"top_logprobs,omitempty" parquet:"top_logprobs,list"`

	// ToolSteps are a tool trajectory's calls (KindToolTrajectory only).
	ToolSteps []ToolStep `json:"tool_steps,omitempty" parquet:"tool_steps,list"`

	// The episode's outcome, the same on every sample. Reward is the
	// hidden tests' reward and stays 1 on a hacked resolution;
	// TrainingReward is what to train on, decided from it and the label
	// by the export's RewardPolicy (by default 0 when hacked, null, that
	// is masked, when unconfirmed or an infrastructure or grading
	// failure, else Reward).
	Reward         float64  `json:"reward" parquet:"reward"`
	TrainingReward *float64 `json:"training_reward" parquet:"training_reward,optional"`
	Resolved       bool     `json:"resolved" parquet:"resolved"`
	Hacked         bool     `json:"hacked" parquet:"hacked"`
	// Label is "hacked", "unconfirmed" (a flagged call no judge confirmed
	// or cleared; not a clean sample) or "clean".
	Label          string   `json:"label" parquet:"label"`
	HackCategories []string `json:"hack_categories" parquet:"hack_categories,list"`
	BlockedSteps   []int64  `json:"blocked_steps" parquet:"blocked_steps,list"`
	FailureClass   string   `json:"failure_class" parquet:"failure_class"`

	// The benchmark instance of the episode's task (EpisodeStart's
	// Instance; empty for rollcage's own tasks), so that results join
	// with the benchmark's tooling on instance_id, and the grade's
	// tests_status (Grade.TestsStatus): the FAIL_TO_PASS and PASS_TO_PASS
	// ids by outcome, as in SWE-bench's report.json.
	InstanceID             string          `json:"instance_id,omitempty" parquet:"instance_id"`
	Benchmark              string          `json:"benchmark,omitempty" parquet:"benchmark"`
	Repo                   string          `json:"repo,omitempty" parquet:"repo"`
	BaseCommit             string          `json:"base_commit,omitempty" parquet:"base_commit"`
	Version                string          `json:"version,omitempty" parquet:"version"`
	EnvironmentSetupCommit string          `json:"environment_setup_commit,omitempty" parquet:"environment_setup_commit"`
	TestsStatus            json.RawMessage `json:"tests_status,omitempty" parquet:"tests_status,json,optional"`
}

// ToolStep is one call of a tool trajectory: the call as made, what the
// monitor decided and the output shown to the policy.
type ToolStep struct {
	Step        int64    `json:"step" parquet:"step"`
	ToolCallID  string   `json:"tool_call_id,omitempty" parquet:"tool_call_id"`
	Tool        string   `json:"tool" parquet:"tool"`
	Args        string   `json:"args" parquet:"args"` // JSON text
	Action      string   `json:"action" parquet:"action"`
	Blocked     bool     `json:"blocked,omitempty" parquet:"blocked"`
	Hack        bool     `json:"hack,omitempty" parquet:"hack"`
	Unconfirmed bool     `json:"unconfirmed,omitempty" parquet:"unconfirmed"`
	Categories  []string `json:"categories,omitempty" parquet:"categories,list"`
	Output      string   `json:"output" parquet:"output"`
	ExitCode    int64    `json:"exit_code" parquet:"exit_code"`
	Dummy       bool     `json:"dummy,omitempty" parquet:"dummy"` // the output was made up: the call did not run
	// Prefix: the call is the parent's, before a fork (see ForkOrigin).
	Prefix bool `json:"prefix,omitempty" parquet:"prefix"`
}

// turnRec is one recorded model turn with where it sits in the episode.
type turnRec struct {
	index  int // among the episode's model_turn events
	seg    int
	mt     ModelTurn
	prefix bool   // the parent's, copied at a fork
	aux    string // why it is auxiliary (markAuxiliary); "" for the episode's own
}

// Why a model turn is auxiliary (Sample.Auxiliary): a call beside the
// episode's conversation through the same proxy, such as a harness's
// title, summary or classifier call. Its sample would carry the
// episode's reward for text the episode's policy did not act on, so
// export leaves it out unless asked (ExportOptions.Auxiliary).
const (
	// AuxClient: the client marked the call (AuxiliaryHeader).
	AuxClient = "client"
	// AuxNoTools: the call sent no tools list where the episode's other
	// calls sent one.
	AuxNoTools = "no_tools"
	// AuxSystemPrompt: the call's system prompt is not the one of the
	// episode's first own call.
	AuxSystemPrompt = "system_prompt"
)

// markAuxiliary sets each turn's aux. A client's mark comes first; then,
// when any unmarked turn sent tools, the unmarked turns without tools are
// auxiliary; of the rest, the first sets the episode's system prompt and
// a turn with another one is auxiliary. A turn that continues the
// conversation of the episode's last own turn (its messages and answer,
// then more; a compaction's summary request), or that the episode's next
// own turn continues (a planning call before the tools came in), is the
// episode's own.
func markAuxiliary(turns []turnRec) {
	withTools := false
	for i := range turns {
		if turns[i].mt.Auxiliary != "" {
			turns[i].aux = AuxClient
		} else if hasTools(turns[i].mt.Tools) {
			withTools = true
		}
	}
	main, last := -1, -1
	for i := range turns {
		t := &turns[i]
		if t.aux != "" {
			continue
		}
		switch {
		case withTools && !hasTools(t.mt.Tools):
			t.aux = AuxNoTools
		case main < 0:
			main = i
		case systemPrompt(t.mt) != systemPrompt(turns[main].mt):
			t.aux = AuxSystemPrompt
		}
		// Compared only when it would be auxiliary: the messages of a
		// long conversation are costly to compare.
		if t.aux != "" && last >= 0 && len(turns[last].mt.Request) > 0 && continues(turns[last].mt, t.mt) {
			t.aux = ""
		}
		if t.aux == "" {
			last = i
		}
	}
	next := -1
	for i := len(turns) - 1; i >= 0; i-- {
		t := &turns[i]
		switch t.aux {
		case "":
			next = i
		case AuxNoTools, AuxSystemPrompt:
			if next >= 0 && len(t.mt.Request) > 0 && continues(t.mt, turns[next].mt) {
				t.aux, next = "", i
			}
		}
	}
}

// continues says whether cur's messages are prev's request and answer and
// then more.
func continues(prev, cur ModelTurn) bool {
	n := len(prev.Request)
	return len(cur.Request) > n &&
		reflect.DeepEqual(cur.Request[:n], prev.Request) &&
		reflect.DeepEqual(cur.Request[n], prev.Response)
}

func hasTools(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && !bytes.Equal(b, []byte("null")) && !bytes.Equal(b, []byte("[]"))
}

// systemPrompt is a turn's first system message ("" when none).
func systemPrompt(mt ModelTurn) string {
	for _, m := range mt.Request {
		if m.Role == RoleSystem {
			return m.Content
		}
	}
	return ""
}

// groups splits the episode's turns into samples' turns: chains
// (GranularitySegment) or single turns (GranularityTurn), of its own turns
// and, with aux, of its auxiliary turns too, in the order of their first
// turns. left is how many auxiliary turns it left out.
func (ep *episode) groups(granularity string, aux bool) (groups [][]turnRec, left int, err error) {
	var own, other []turnRec
	for _, t := range ep.turns {
		if t.aux == "" {
			own = append(own, t)
		} else {
			other = append(other, t)
		}
	}
	split := chains
	switch granularity {
	case GranularitySegment, "":
	case GranularityTurn:
		split = func(ts []turnRec) [][]turnRec {
			var out [][]turnRec
			for _, t := range ts {
				out = append(out, []turnRec{t})
			}
			return out
		}
	default:
		return nil, 0, fmt.Errorf("unknown granularity %q: use %q or %q", granularity, GranularitySegment, GranularityTurn)
	}
	groups = split(own)
	if !aux {
		return groups, len(other), nil
	}
	// A chain of auxiliary turns holds turns of one reason.
	for _, g := range split(other) {
		for len(g) > 0 {
			n := 1
			for n < len(g) && g[n].aux == g[0].aux {
				n++
			}
			groups = append(groups, g[:n])
			g = g[n:]
		}
	}
	slices.SortStableFunc(groups, func(a, b []turnRec) int { return a[0].index - b[0].index })
	return groups, 0, nil
}

func (t turnRec) tokenful() bool { return len(t.mt.PromptTokenIDs) > 0 && len(t.mt.TokenIDs) > 0 }

// episode is what export reads of one episode's log.
type episode struct {
	id       string
	start    EpisodeStart
	end      EpisodeEnd
	grade    Grade
	outcome  Sample // the outcome fields, copied into every sample
	summary  map[int]string
	turns    []turnRec // failed turns left out
	steps    []ToolStep
	outputs  map[string]string // tool_call_id → output shown
	turnTime map[int]string    // turn index → RFC 3339 time
	decided  map[int]bool      // steps with a late verdict (LateVerdict)
	// undecided counts the steps still unconfirmed: flagged, run, and
	// decided neither in the episode nor by a late verdict.
	undecided int
}

// unconfirmed says whether the step ran unconfirmed and is still
// undecided.
func (ep episode) unconfirmed(step int) bool {
	for _, st := range ep.steps {
		if st.Step == int64(step) {
			return st.Unconfirmed
		}
	}
	return false
}

// readEpisode reads one episode's events; ok is false for an unfinished
// one. Of the events after episode_end only late verdicts (TypeVerdict)
// count: each decides an unconfirmed step once.
func readEpisode(evs []Event) (ep episode, ok bool, err error) {
	var (
		cats    []string
		blocked []int64
		hacked  bool
		unconf  int
		ended   bool
		graded  bool
		gradeOK bool
		byStep  = map[int]int{} // step → index in ep.steps
		nturns  int
	)
	ep.summary, ep.outputs, ep.turnTime, ep.decided = map[int]string{}, map[string]string{}, map[int]string{}, map[int]bool{}
	if len(evs) > 0 {
		ep.id = evs[0].EpisodeID
	}
	step := func(n int) *ToolStep {
		i, ok := byStep[n]
		if !ok {
			i = len(ep.steps)
			byStep[n] = i
			ep.steps = append(ep.steps, ToolStep{Step: int64(n)})
		}
		return &ep.steps[i]
	}
	for _, ev := range evs {
		if ended != (ev.Type == TypeVerdict) {
			continue // nothing else counts after the end, no verdict before it
		}
		switch ev.Type {
		case TypeEpisodeStart:
			err = ev.Decode(&ep.start)
		case TypeModelTurn:
			var mt ModelTurn
			if err = ev.Decode(&mt); err == nil {
				if mt.Error == "" {
					ep.turns = append(ep.turns, turnRec{index: nturns, seg: ev.Segment, mt: mt, prefix: ep.inPrefix(ev)})
					if !ev.Time.IsZero() {
						ep.turnTime[nturns] = ev.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00")
					}
				}
				nturns++
			}
		case TypeCompaction:
			var c Compaction
			if err = ev.Decode(&c); err == nil {
				ep.summary[c.To] = c.Summary
			}
		case TypeToolCall:
			var tc ToolCall
			if err = ev.Decode(&tc); err == nil {
				var call struct {
					Tool string          `json:"tool"`
					Args json.RawMessage `json:"args"`
				}
				_ = json.Unmarshal(tc.Call, &call) // the monitor's schema, read loosely
				st := step(ev.Step)
				st.ToolCallID, st.Tool, st.Args = tc.ToolCallID, call.Tool, string(call.Args)
				st.Prefix = ep.inPrefix(ev)
			}
		case TypeToolOutput:
			var out ToolOutput
			if err = ev.Decode(&out); err == nil {
				st := step(ev.Step)
				st.Output, st.ExitCode, st.Dummy = out.Output, int64(out.ExitCode), out.Dummy
				if out.ToolCallID != "" {
					ep.outputs[out.ToolCallID] = out.Output
				}
			}
		case TypeDecision:
			var d Decision
			if err = ev.Decode(&d); err == nil {
				if d.Blocked {
					blocked = append(blocked, int64(ev.Step))
				}
				hack, cat := d.Hack, d.Categories
				if len(d.Verdict) > 0 {
					// The judge's verdict, read loosely: its schema is not ours.
					var v struct {
						Hack     bool   `json:"hack"`
						Category string `json:"category"`
					}
					if json.Unmarshal(d.Verdict, &v) == nil && v.Hack {
						hack = true
						if v.Category != "" {
							cat = append(slices.Clone(cat), v.Category)
						}
					}
				}
				if d.Unconfirmed {
					unconf++
				}
				if hack || d.Blocked {
					hacked = true
					cats = append(cats, cat...)
				}
				st := step(ev.Step)
				st.Action, st.Blocked, st.Hack, st.Unconfirmed, st.Categories = d.Action, d.Blocked, hack, d.Unconfirmed, cat
			}
		case TypeGrade:
			if err = ev.Decode(&ep.grade); err == nil {
				graded, gradeOK = true, ep.grade.Error == ""
			}
		case TypeEpisodeEnd:
			err = ev.Decode(&ep.end)
			ended = true
		case TypeVerdict:
			var v LateVerdict
			if err = ev.Decode(&v); err != nil {
				break
			}
			i, ok := byStep[v.Step]
			if !ok || !ep.steps[i].Unconfirmed || ep.decided[v.Step] {
				break // RecordVerdict refuses these; a hand-edited log may hold them
			}
			ep.decided[v.Step] = true
			st := &ep.steps[i]
			st.Unconfirmed = false
			if v.Hack {
				hacked, st.Hack = true, true
				if v.Category != "" {
					st.Categories = append(slices.Clone(st.Categories), v.Category)
					cats = append(cats, v.Category)
				}
			}
		}
		if err != nil {
			return episode{}, false, err
		}
	}
	if !ended {
		return episode{}, false, nil
	}
	markAuxiliary(ep.turns)
	slices.Sort(cats)
	cats = slices.Compact(cats)
	label := ep.end.Label
	ep.undecided = max(unconf, ep.end.Counts.Unconfirmed) - len(ep.decided)
	if label == "" || hacked || len(ep.decided) > 0 { // an older log, a hack its end did not count, late verdicts
		label = EpisodeLabel(hacked || ep.end.Hacked, ep.undecided)
	}
	failure := ep.end.FailureClass
	if failure == FailureAgent && ep.end.Reason == "submit" && graded && gradeOK {
		// Logs from before the fix called a graded, unresolved
		// submission an agent failure; it is none.
		failure = FailureNone
	}
	ep.outcome = Sample{
		EpisodeID: ep.id, TaskID: ep.start.TaskID, Attempt: int64(ep.start.Attempt), GroupID: ep.start.GroupID,
		Reward: ep.end.Reward, Resolved: ep.end.Resolved, Hacked: hacked || ep.end.Hacked, Label: label,
		HackCategories: cats, BlockedSteps: blocked, FailureClass: failure,
	}
	if f := ep.start.Fork; f != nil {
		step := int64(f.BranchStep)
		ep.outcome.ParentEpisodeID, ep.outcome.BranchStep, ep.outcome.ForkGroupID = f.ParentEpisodeID, &step, f.GroupID()
	}
	if in := ep.start.Instance; in != nil {
		o := &ep.outcome
		o.InstanceID, o.Benchmark, o.Repo, o.BaseCommit = in.InstanceID, in.Benchmark, in.Repo, in.BaseCommit
		o.Version, o.EnvironmentSetupCommit, o.TestsStatus = in.Version, in.EnvironmentSetupCommit, ep.grade.TestsStatus
	}
	return ep, true, nil
}

// OutcomeOf is what export says of one ended episode as a whole, late
// verdicts applied: the outcome fields every one of its samples carries
// (Reward, TrainingReward by policy, Resolved, Hacked, Label,
// HackCategories, BlockedSteps, FailureClass, the episode's ids; no
// turn's fields), and how many of its steps are still unconfirmed. evs
// are as Exporter.Episode takes them: the log's events, then the late
// verdicts on it. ok is false for an episode that has not ended.
func OutcomeOf(evs []Event, policy RewardPolicy) (o Sample, unconfirmed int, ok bool, err error) {
	ep, ok, err := readEpisode(evs)
	if err != nil || !ok {
		return Sample{}, 0, false, err
	}
	ep.decide(policy)
	return ep.outcome, ep.undecided, true, nil
}

// decide sets the outcome's training reward by policy.
func (ep *episode) decide(policy RewardPolicy) {
	o := &ep.outcome
	o.TrainingReward = policy.TrainingReward(o.Reward, o.Label, o.FailureClass)
}

// inPrefix says whether an event is a copy of the parent's (the episode
// was forked and the event is among the first ForkOrigin.PrefixEvents
// after episode_start).
func (ep *episode) inPrefix(ev Event) bool {
	return ep.start.Fork != nil && ev.Offset >= 1 && ev.Offset <= int64(ep.start.Fork.PrefixEvents)
}

// chains splits the turns where a prompt stops extending the previous
// prompt plus its completion: in token ids when both turns have them, else
// in messages. A new segment (compaction) or a changed tools list always
// starts a new chain.
func chains(turns []turnRec) [][]turnRec {
	var out [][]turnRec
	for i, t := range turns {
		if i == 0 || !extends(turns[i-1], t) {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], t)
	}
	return out
}

func extends(prev, cur turnRec) bool {
	if prev.seg != cur.seg || !bytes.Equal(prev.mt.Tools, cur.mt.Tools) {
		return false
	}
	if prev.tokenful() && cur.tokenful() {
		seq := slices.Concat(prev.mt.PromptTokenIDs, prev.mt.TokenIDs)
		return len(cur.mt.PromptTokenIDs) >= len(seq) && slices.Equal(cur.mt.PromptTokenIDs[:len(seq)], seq)
	}
	return continues(prev.mt, cur.mt)
}

// SamplesOf turns one episode's events into its training samples, in
// order: one per chain of model turns (GranularitySegment) or one per
// model turn (GranularityTurn); an episode with tool calls but no model
// turn gives one KindToolTrajectory sample. Turns recorded as failed,
// and auxiliary turns (see AuxClient), are left out. It returns none for
// an episode without an episode_end event. Their training reward is the
// default RewardPolicy's.
func SamplesOf(evs []Event, granularity string) ([]Sample, error) {
	ss, _, err := samplesOf(evs, ExportOptions{Granularity: granularity, Prefix: PrefixMask})
	return ss, err
}

// samplesOf is SamplesOf with a forked episode's prefix masked
// (PrefixMask) or left out (PrefixOnce), auxiliary turns as opts say and
// training rewards by opts.Reward. left is how many auxiliary turns it
// left out.
func samplesOf(evs []Event, opts ExportOptions) (out []Sample, left int, err error) {
	ep, ok, err := readEpisode(evs)
	if err != nil || !ok {
		return nil, 0, err
	}
	ep.decide(opts.Reward)
	var prefixTurns int64 // left out
	if opts.Prefix == PrefixOnce {
		n := len(ep.turns)
		ep.turns = slices.DeleteFunc(ep.turns, func(t turnRec) bool { return t.prefix && t.aux == "" })
		prefixTurns = int64(n - len(ep.turns))
		ep.turns = slices.DeleteFunc(ep.turns, func(t turnRec) bool { return t.prefix })
		ep.steps = slices.DeleteFunc(ep.steps, func(s ToolStep) bool { return s.Prefix })
	}
	groups, left, err := ep.groups(opts.Granularity, opts.Auxiliary)
	if err != nil {
		return nil, 0, err
	}
	kind := KindSegment
	if opts.Granularity == GranularityTurn {
		kind = KindTurn
	}
	for _, g := range groups {
		s := ep.sample(kind, g)
		if prefixTurns > 0 && s.Auxiliary == "" {
			s.PrefixTurns, prefixTurns = prefixTurns, 0
		}
		out = append(out, s.lists())
	}
	if len(ep.turns) == 0 && len(ep.steps) > 0 { // auxiliary turns count: the proxy was used
		s := ep.outcome
		s.Kind, s.SampleID, s.Tokens, s.ToolSteps = KindToolTrajectory, sampleID(ep.id, KindToolTrajectory, 0, 0), TokenIDsAbsent, ep.steps
		out = append(out, s.lists())
	}
	return out, left, nil
}

// Samples is SamplesOf with GranularitySegment.
func Samples(evs []Event) ([]Sample, error) { return SamplesOf(evs, GranularitySegment) }

func sampleID(episode, kind string, segment, turn int) string {
	return fmt.Sprintf("%s/%s/%d/%d", episode, kind, segment, turn)
}

// sample builds the sample of one group of turns (a chain, or one turn).
func (ep episode) sample(kind string, g []turnRec) Sample {
	first, last := g[0], g[len(g)-1]
	s := ep.outcome
	s.Kind, s.SampleID = kind, sampleID(ep.id, kind, first.seg, first.index)
	s.Segment, s.Turn, s.Turns = int64(first.seg), int64(first.index), int64(len(g))
	s.Summary = ep.summary[first.seg]
	s.Auxiliary = first.aux
	s.Tools, s.Params = last.mt.Tools, last.mt.Params
	msgs := append(slices.Clone(last.mt.Request), last.mt.Response)
	s.Messages = msgs
	s.MessageMask = make([]int32, len(msgs))
	s.MessageTokenIDs = make([][]int64, len(msgs))
	s.MessageLogprobs = make([][]float64, len(msgs))
	for _, t := range g {
		if t.prefix {
			s.PrefixTurns++
			continue // the parent's: trained on in the parent's samples
		}
		i := len(t.mt.Request)
		if i < len(msgs) && msgs[i].Role == RoleAssistant && reflect.DeepEqual(msgs[i], t.mt.Response) {
			s.MessageMask[i] = 1
			s.MessageTokenIDs[i] = t.mt.TokenIDs
			s.MessageLogprobs[i] = t.mt.Logprobs
		}
	}
	s.Tokens = TokenIDsAbsent
	switch {
	case allOf(g, turnRec.tokenful):
		if tokenSeq(&s, g) {
			s.Tokens = TokenIDsPresent
		}
	case len(g) == 1 && len(first.mt.TokenIDs) > 0:
		s.Tokens = TokenIDsCompletionOnly
		s.CompletionTokenIDs = first.mt.TokenIDs
		s.LossMask = ones(len(first.mt.TokenIDs))
		if first.prefix {
			s.LossMask = make([]int32, len(first.mt.TokenIDs))
		}
		if len(first.mt.Logprobs) == len(first.mt.TokenIDs) {
			s.Logprobs = first.mt.Logprobs
		}
		if len(first.mt.TopLogprobs) == len(first.mt.TokenIDs) {
			s.TopLogprobs = first.mt.TopLogprobs
		}
	}
	if s.Tokens == TokenIDsAbsent && slices.ContainsFunc(g, func(t turnRec) bool { return t.mt.TokensUnavailable != "" }) {
		s.Tokens = TokenIDsUnavailable
	}
	return s
}

// tokenSeq fills the token fields of a chain whose turns all have prompt
// and completion ids; false (nothing filled) if a prompt does not extend
// the sequence so far.
func tokenSeq(s *Sample, g []turnRec) bool {
	prompt := g[0].mt.PromptTokenIDs
	var comp []int64
	var mask []int32
	var lps []float64
	var top [][]TopLogprob
	lpOK, anyTop := true, false
	seqLen := len(prompt)
	for i, t := range g {
		if i > 0 {
			p := t.mt.PromptTokenIDs
			if len(p) < seqLen || !slices.Equal(p[:len(prompt)], prompt) || !slices.Equal(p[len(prompt):seqLen], comp) {
				return false
			}
			gap := p[seqLen:]
			comp = append(comp, gap...)
			mask = append(mask, make([]int32, len(gap))...)
			lps = append(lps, make([]float64, len(gap))...)
			top = append(top, make([][]TopLogprob, len(gap))...)
		}
		ids := t.mt.TokenIDs
		comp = append(comp, ids...)
		if t.prefix {
			mask = append(mask, make([]int32, len(ids))...)
		} else {
			mask = append(mask, ones(len(ids))...)
		}
		if len(t.mt.Logprobs) == len(ids) {
			lps = append(lps, t.mt.Logprobs...)
		} else {
			lpOK = false
		}
		if len(t.mt.TopLogprobs) == len(ids) {
			top = append(top, t.mt.TopLogprobs...)
			anyTop = true
		} else {
			top = append(top, make([][]TopLogprob, len(ids))...)
		}
		seqLen = len(prompt) + len(comp)
	}
	s.PromptTokenIDs, s.CompletionTokenIDs = prompt, comp
	s.LossMask = append(make([]int32, len(prompt)), mask...)
	if lpOK {
		s.Logprobs = lps
	}
	if anyTop {
		s.TopLogprobs = top
	}
	return true
}

// lists makes the token lists empty rather than null, so readers can take
// their length without a check.
func (s Sample) lists() Sample {
	if s.PromptTokenIDs == nil {
		s.PromptTokenIDs = []int64{}
	}
	if s.CompletionTokenIDs == nil {
		s.CompletionTokenIDs = []int64{}
	}
	if s.LossMask == nil {
		s.LossMask = []int32{}
	}
	if s.Logprobs == nil {
		s.Logprobs = []float64{}
	}
	if s.Messages == nil {
		s.Messages = []Message{}
	}
	return s
}

func allOf(g []turnRec, f func(turnRec) bool) bool {
	for _, t := range g {
		if !f(t) {
			return false
		}
	}
	return true
}

func ones(n int) []int32 {
	m := make([]int32, n)
	for i := range m {
		m[i] = 1
	}
	return m
}
