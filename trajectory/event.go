package trajectory

import (
	"encoding/json"
	"fmt"
	"time"
)

// Event types. The Data of an event is the payload struct named beside it.
const (
	TypeEpisodeStart = "episode_start" // EpisodeStart
	TypeModelTurn    = "model_turn"    // ModelTurn
	TypeToolCall     = "tool_call"     // ToolCall
	TypeDecision     = "decision"      // Decision
	TypeToolOutput   = "tool_output"   // ToolOutput
	TypeNetwork      = "network"       // Network
	TypeCompaction   = "compaction"    // Compaction
	TypeGrade        = "grade"         // Grade
	TypeEpisodeEnd   = "episode_end"   // EpisodeEnd; the last event of a log

	// TypeSegmentEnd appears only in the finished feed: a segment was closed
	// by a compaction or by the episode's end. Data is SegmentEnd.
	TypeSegmentEnd = "segment_end"
	// TypeVerdict appears only in the store's verdict log: a judge's
	// verdict on an ended episode's unconfirmed step (Store.RecordVerdict).
	// Data is LateVerdict.
	TypeVerdict = "verdict"
)

// LateVerdict is a verdict on a step that ran unconfirmed (flagged, with
// no judge's verdict in the episode), given after the episode ended: by
// a judge run later, or a reviewer. Export applies it: a hack makes the
// episode hacked, a clean verdict takes the step's unconfirmed mark away,
// and the label and training reward follow (a masked unconfirmed episode
// gets its decided reward on the next export).
type LateVerdict struct {
	Step       int     `json:"step"`
	Hack       bool    `json:"hack"`
	Category   string  `json:"category,omitempty"`
	Confidence float64 `json:"confidence,omitempty"`
	Rationale  string  `json:"rationale,omitempty"`
	// Judge says who decided (a model, a reviewer).
	Judge string `json:"judge,omitempty"`
}

// Event is one thing that happened in an episode. Its JSON is one line of the
// episode's log and one message of the WebSocket stream.
type Event struct {
	// Offset is the position in its log, assigned by the Log: 0-based and
	// dense, so line n of a file is the event with Offset n.
	Offset    int64     `json:"offset"`
	EpisodeID string    `json:"episode_id"`
	Segment   int       `json:"segment"` // sub-trace index; a compaction starts a new one
	Step      int       `json:"step"`    // tool-call / turn counter within the episode
	Type      string    `json:"type"`
	Time      time.Time `json:"time"`
	// Data is the payload: one of the structs below, by Type.
	Data json.RawMessage `json:"data,omitempty"`
}

// NewEvent builds an event with its payload marshalled into Data. Offset and
// Time are left for the Log to assign.
func NewEvent(episodeID string, segment, step int, typ string, payload any) (Event, error) {
	ev := Event{EpisodeID: episodeID, Segment: segment, Step: step, Type: typ}
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return Event{}, fmt.Errorf("trajectory: marshal %s payload: %w", typ, err)
		}
		ev.Data = b
	}
	return ev, nil
}

// Decode unmarshals the event's Data into payload (a pointer to one of the
// payload structs).
func (e Event) Decode(payload any) error {
	if len(e.Data) == 0 {
		return fmt.Errorf("trajectory: decode %s event %d: no data", e.Type, e.Offset)
	}
	if err := json.Unmarshal(e.Data, payload); err != nil {
		return fmt.Errorf("trajectory: decode %s event %d: %w", e.Type, e.Offset, err)
	}
	return nil
}

// EpisodeStart opens an episode.
type EpisodeStart struct {
	TaskID      string `json:"task_id"`
	Attempt     int    `json:"attempt,omitempty"` // 0-based retry index of the task in a batch
	Model       string `json:"model,omitempty"`
	Image       string `json:"image,omitempty"`
	Instruction string `json:"instruction,omitempty"`
	SandboxID   string `json:"sandbox_id,omitempty"`
	// GroupID is the group of episodes of one task this one belongs to.
	GroupID string `json:"group_id,omitempty"`
	// Config is the episode's configuration as its owner recorded it.
	Config json.RawMessage `json:"config,omitempty"`
	// Context is what the monitor knew at start: {"task": the task
	// context, "sandbox": the sandbox facts (future commits and refs,
	// canaries, visible-test files)}, so an offline audit replays each call
	// with the facts the online decision had.
	Context json.RawMessage `json:"context,omitempty"`
	// Fork is set on a forked episode: where it branched off its parent.
	Fork *ForkOrigin `json:"fork,omitempty"`
	// Instance is set when the task is a benchmark's instance.
	Instance *Instance `json:"instance,omitempty"`
}

// Instance is the benchmark instance an episode's task came from
// (SWE-bench and its family, a Harbor task), with the fields the
// benchmark's own tooling joins results on, named as the benchmark
// names them.
type Instance struct {
	InstanceID             string   `json:"instance_id"`
	Benchmark              string   `json:"benchmark,omitempty"` // swe-bench, swe-gym, swe-smith, multi-swe-bench, harbor
	Repo                   string   `json:"repo,omitempty"`      // owner/name
	Language               string   `json:"language,omitempty"`
	BaseCommit             string   `json:"base_commit,omitempty"`
	Version                string   `json:"version,omitempty"`
	EnvironmentSetupCommit string   `json:"environment_setup_commit,omitempty"`
	FailToPass             []string `json:"FAIL_TO_PASS,omitempty"`
	PassToPass             []string `json:"PASS_TO_PASS,omitempty"`
}

// ForkOrigin says where a forked episode branched off. Its log starts
// with episode_start and then a copy of the parent's events up to the
// branch, under the child's episode id and with their steps, segments and
// times as the parent recorded them: the prefix it shares with its
// parent and its siblings. Export marks that prefix (see
// ExportOptions.Prefix).
type ForkOrigin struct {
	ParentEpisodeID string `json:"parent_episode_id"`
	// BranchStep is the parent's last tool call before the fork (0: it
	// forked before any); the child's calls are numbered on from it.
	BranchStep int `json:"branch_step"`
	// PrefixEvents is how many events after episode_start are copied from
	// the parent (offsets 1 to PrefixEvents).
	PrefixEvents int `json:"prefix_events"`
	// PrefixTurns is how many of them are model turns (failed ones
	// included): the child's turns with a lower index are the parent's.
	PrefixTurns int `json:"prefix_turns"`
}

// GroupID is the group of the episodes forked off the same parent at the
// same step, "<parent>.b<step>": siblings, which tree-GRPO compares with
// each other. The parent, which goes on from that step too, is not in it.
func (f ForkOrigin) GroupID() string {
	return fmt.Sprintf("%s.b%d", f.ParentEpisodeID, f.BranchStep)
}

// Message is one chat message in the OpenAI format.
type Message struct {
	Role       string         `json:"role" parquet:"role"` // system, user, assistant, tool
	Content    string         `json:"content" parquet:"content"`
	ToolCalls  []FunctionCall `json:"tool_calls,omitempty" parquet:"tool_calls,list"`
	ToolCallID string         `json:"tool_call_id,omitempty" parquet:"tool_call_id"`
	Name       string         `json:"name,omitempty" parquet:"name"`
}

// Roles of a Message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// FunctionCall is one tool call of an assistant message (OpenAI's
// tool_calls[i]).
type FunctionCall struct {
	ID       string   `json:"id" parquet:"id"`
	Type     string   `json:"type" parquet:"type"` // "function"
	Function Function `json:"function" parquet:"function"`
}

// Function names the tool and carries its arguments as a JSON string, as
// OpenAI does.
type Function struct {
	Name      string `json:"name" parquet:"name"`
	Arguments string `json:"arguments" parquet:"arguments"`
}

// Usage is the token accounting of one model turn.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ModelTurn is one request to the policy model and its answer, with
// everything a trainer needs to rebuild it token for token: the messages,
// the tools list and sampling parameters as sent, and the ids, logprobs and
// token strings as the server returned them (never re-tokenized).
//
// Request is the complete message list sent, not a delta. A harness that
// rewrites or condenses its history sends a Request that does not extend
// the previous turn's; export then starts a new chain there (see Samples).
type ModelTurn struct {
	Model    string    `json:"model,omitempty"`
	Request  []Message `json:"request"`
	Response Message   `json:"response"`
	// Tools is the request's "tools" list exactly as sent; Params are its
	// other fields (temperature, top_p, max_tokens, seed, stop, logprobs,
	// server extensions, ...) as sent, without messages, tools and model.
	Tools  json.RawMessage `json:"tools,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	// PromptTokenIDs are the prompt's token ids when the server returned
	// them (vLLM return_token_ids, SGLang input_token_logprobs);
	// PromptLogprobs is vLLM's prompt_logprobs as served.
	PromptTokenIDs []int64         `json:"prompt_token_ids,omitempty"`
	PromptLogprobs json.RawMessage `json:"prompt_logprobs,omitempty"`
	// TokenIDs, Logprobs, Tokens (the token strings) and TopLogprobs are
	// of the Response's completion tokens, when the server returned them;
	// each non-empty one has one entry per completion token.
	TokenIDs     []int64        `json:"token_ids,omitempty"`
	Logprobs     []float64      `json:"logprobs,omitempty"`
	Tokens       []string       `json:"tokens,omitempty"`
	TopLogprobs  [][]TopLogprob `json:"top_logprobs,omitempty"`
	FinishReason string         `json:"finish_reason,omitempty"`
	Usage        Usage          `json:"usage"`
	LatencyMS    int64          `json:"latency_ms,omitempty"`
	// API is the endpoint the turn went to: APIChat (the default when
	// empty), APICompletions, APIMessages (Anthropic) or APIResponses
	// (OpenAI Responses). Prompt is a
	// completions request's prompt (Request is then empty).
	API    string `json:"api,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	// Session holds the session keys the request carried, passed to the
	// upstream unchanged (routers pin a session to one replica by them):
	// "x-session-id", "x-smg-routing-key" (headers), "metadata.session_id",
	// "session_id", "cache_salt", "extra_body.session_id",
	// "extra_body.cache_salt" (body), "path" (/sessions/{id}/v1/...) and
	// "authorization" (Bearer <session> sent upstream when so configured).
	Session map[string]string `json:"session,omitempty"`
	// Error says why the turn failed part-way (an upstream that broke a
	// stream); Response then holds what arrived before. Export skips failed
	// turns.
	Error string `json:"error,omitempty"`
	// TokensUnavailable says why the turn has no token ids: the model
	// server refused the fields that ask for them (RefusedFields) and the
	// request went again as the client sent it. Export marks such a
	// turn's samples TokenIDsUnavailable.
	TokensUnavailable string `json:"tokens_unavailable,omitempty"`
	// Auxiliary is set when the client marked the turn as a call of its
	// own beside the episode's conversation (a title, a summary, a
	// classifier) with the AuxiliaryHeader; it holds the header's value.
	// Export leaves such turns out of the episode's samples unless asked
	// (ExportOptions.Auxiliary), as it does turns without the episode's
	// tools or system prompt.
	Auxiliary string `json:"auxiliary,omitempty"`
}

// AuxiliaryHeader is the request header by which a client marks a model
// call through an episode's proxy as auxiliary (ModelTurn.Auxiliary):
// its value says what the call is for ("title", "summary"); "0" and
// "false" mark nothing. The header is not passed to the model server.
const AuxiliaryHeader = "X-Rollcage-Auxiliary"

// APIs of a ModelTurn.
const (
	APIChat        = "chat.completions"
	APICompletions = "completions"
	APIMessages    = "messages"
	APIResponses   = "responses" // OpenAI Responses; instructions and input recorded as messages
)

// TopLogprob is one alternative at a completion position: its token
// string, log probability and, when the server sent it, its token id.
type TopLogprob struct {
	Token   string  `json:"token" parquet:"token"`
	Logprob float64 `json:"logprob" parquet:"logprob"`
	ID      *int64  `json:"id,omitempty" parquet:"id,optional"`
}

// ToolCall is a call as the policy made it, before the monitor decides.
type ToolCall struct {
	ToolCallID string `json:"tool_call_id,omitempty"` // the id in the assistant message
	// Call is the monitor's ToolCall JSON.
	Call json.RawMessage `json:"call"`
}

// Decision actions.
const (
	ActionAllow   = "allow"
	ActionBlock   = "block"
	ActionRewrite = "rewrite"
)

// Decision is what the monitor made of one call.
type Decision struct {
	Call       json.RawMessage `json:"call,omitempty"`       // toolcall.Call
	Normalized json.RawMessage `json:"normalized,omitempty"` // toolcall.Normalized
	Flags      json.RawMessage `json:"flags,omitempty"`      // []rules.Flag
	Verdict    json.RawMessage `json:"verdict,omitempty"`    // judge.Verdict, when the judge was asked
	Action     string          `json:"action"`               // ActionAllow, ActionBlock, ActionRewrite
	Rewritten  json.RawMessage `json:"rewritten,omitempty"`  // the safe form run instead (rewrite)
	Blocked    bool            `json:"blocked,omitempty"`    // the call did not run
	Dummy      bool            `json:"dummy,omitempty"`      // the policy is shown dummy output
	// Hack is true when the call was confirmed as a hack (judge verdict or a
	// certain flag); Categories are the hack categories found. They repeat
	// what Flags and Verdict say so that readers need not know their schema.
	Hack       bool     `json:"hack,omitempty"`
	Categories []string `json:"categories,omitempty"`
	// Unconfirmed: flagged and allowed to run, and no judge confirmed or
	// cleared it (none configured, or undecided under the fail policy).
	Unconfirmed bool  `json:"unconfirmed,omitempty"`
	LatencyMS   int64 `json:"latency_ms,omitempty"`
	// Effects are what the call did to the sandbox's files (created,
	// modified, deleted, renamed, chmodded), as the sandbox's watch saw
	// them; EffectsTruncated: some were lost. Replaying a trajectory's
	// creations gives the provenance its rules saw (input.provenance).
	Effects          []Effect `json:"effects,omitempty"`
	EffectsTruncated bool     `json:"effects_truncated,omitempty"`
}

// Effect is one thing a call did to a file: Op is "create", "modify",
// "delete", "rename" (moved away) or "chmod".
type Effect struct {
	Path  string `json:"path"`
	Op    string `json:"op"`
	IsDir bool   `json:"is_dir,omitempty"`
}

// ToolOutput is the output of a call as shown to the policy.
type ToolOutput struct {
	ToolCallID string `json:"tool_call_id,omitempty"`
	Output     string `json:"output"`
	ExitCode   int    `json:"exit_code"`
	Dummy      bool   `json:"dummy,omitempty"` // made up by the monitor, the call did not run
	Truncated  bool   `json:"truncated,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	// Result is the sandbox's ExecResult JSON of the real run, if any.
	Result json.RawMessage `json:"result,omitempty"`
}

// Network is one egress request seen by the proxy, attributed to the call in
// flight.
type Network struct {
	Method  string `json:"method"`
	Host    string `json:"host"`
	URL     string `json:"url,omitempty"`
	Route   string `json:"route,omitempty"` // the model route the request went under
	Allowed bool   `json:"allowed"`
	Status  int    `json:"status,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Bytes   int64  `json:"bytes,omitempty"`
}

// Compaction closes segment From and opens segment To, whose conversation
// starts from Summary. The event itself carries Segment = To.
type Compaction struct {
	From    int    `json:"from"`
	To      int    `json:"to"`
	Summary string `json:"summary"`
	// TokensBefore is the conversation's size that triggered the compaction.
	TokensBefore int `json:"tokens_before,omitempty"`
}

// Grade is the result of the hidden tests.
type Grade struct {
	Reward          float64  `json:"reward"`
	Passed          int      `json:"passed"`
	Failed          int      `json:"failed"`
	Errors          int      `json:"errors,omitempty"`
	Skipped         int      `json:"skipped,omitempty"`
	ExitCode        int      `json:"exit_code"`
	Summary         string   `json:"summary,omitempty"` // the test runner's summary line
	ProtectedIntact bool     `json:"protected_intact"`  // visible tests unchanged at submit
	Changed         []string `json:"changed,omitempty"` // protected files whose hash changed
	DurationMS      int64    `json:"duration_ms,omitempty"`
	// What was graded: the mode (diff or snapshot), the submitted diff's
	// sha256 and size, the files it changes, and how long each phase took.
	Mode       string       `json:"mode,omitempty"`
	DiffSHA256 string       `json:"diff_sha256,omitempty"`
	DiffBytes  int          `json:"diff_bytes"`
	Files      []GradedFile `json:"files,omitempty"`
	Phases     GradePhases  `json:"phases"`
	Survivors  int          `json:"survivors,omitempty"` // processes of the sandbox user alive after the kill
	Error      string       `json:"error,omitempty"`     // why no test ran (a submission the policy broke)
	// Rule is the reward rule ("tests": by test id with probes and the
	// framework watched; "summary": pytest's summary line, forgeable;
	// RuleExternal: a harness outside rollcage graded the episode and
	// posted its reward, and no hidden test or submit check ran here).
	// Statuses is every expected id's status, Probes the known-answer
	// probes', Integrity "watched" or "unavailable"; Tampered: a probe or
	// the integrity watch showed the outcomes forged (reward 0).
	Rule      string            `json:"rule,omitempty"`
	Statuses  map[string]string `json:"statuses,omitempty"`
	Probes    []GradeProbe      `json:"probes,omitempty"`
	Integrity string            `json:"integrity,omitempty"`
	Tampered  bool              `json:"tampered,omitempty"`
	// Dropped are compiled files of the change beside their own source,
	// left out of the applied change (the source is compiled afresh).
	Dropped []string `json:"dropped,omitempty"`
	// Cases is how many differential cases ran, CasesFailed how many
	// differed from the reference fix (a special_casing flag).
	Cases       int `json:"cases,omitempty"`
	CasesFailed int `json:"cases_failed,omitempty"`
	// VerifierInSubmission: the task's own verifier (a Harbor task's
	// tests/test.sh) decided the reward, running on the submitted
	// filesystem, whose interpreter and tools the solution could have
	// replaced; only a pytest it ran was watched (Integrity).
	VerifierInSubmission bool `json:"verifier_in_submission,omitempty"`
	// Disk says what held the grading sandbox to its disk limit: "kernel"
	// (ENOSPC or EDQUOT at the limit), "watchdog" (a host-side walk, which
	// unlinked-but-open files and fallocate get past), "eviction"
	// (Kubernetes, after the fact) or "none"; "" when the backend does
	// not say.
	Disk string `json:"disk,omitempty"`
	// Source names the grader of an external reward (RuleExternal), as
	// the harness that posted it gave it; "" when it gave none.
	Source string `json:"source,omitempty"`
	// TestsStatus is, for a benchmark instance graded by test id, its
	// FAIL_TO_PASS and PASS_TO_PASS ids sorted into success and failure
	// by the statuses, as in the tests_status of SWE-bench's report.json.
	TestsStatus json.RawMessage `json:"tests_status,omitempty"`
}

// RuleExternal is Grade.Rule of a reward decided outside rollcage: a
// harness that grades the sandbox itself posted it (the E2B API's
// POST /sandboxes/{id}/rollcage/reward).
const RuleExternal = "external"

// GradeProbe is one known-answer probe of a grading: the hidden test it
// perturbs ("" for a literal probe), whether it must fail, its instances'
// statuses, and whether it behaved.
type GradeProbe struct {
	Test     string   `json:"test,omitempty"`
	MustFail bool     `json:"must_fail"`
	Statuses []string `json:"statuses"`
	OK       bool     `json:"ok"`
}

// GradedFile is one file of the submitted change: workdir-relative path
// and git's status letter (A, M, D, T).
type GradedFile struct {
	Path   string `json:"path"`
	Status string `json:"status"`
}

// GradePhases are the durations of grading's phases in milliseconds: kill
// the policy's processes, take the diff, snapshot (snapshot mode), get a
// fresh sandbox, ask its interpreter for the import surface (once per
// image), apply the diff, run the hidden tests.
type GradePhases struct {
	KillMS     int64 `json:"kill_ms"`
	DiffMS     int64 `json:"diff_ms"`
	SnapshotMS int64 `json:"snapshot_ms,omitempty"`
	SandboxMS  int64 `json:"sandbox_ms"`
	SurfaceMS  int64 `json:"surface_ms,omitempty"`
	ApplyMS    int64 `json:"apply_ms"`
	TestsMS    int64 `json:"tests_ms"`
	// FactsMS: waiting for the task's facts (derived once per image);
	// RerunMS: the base commit's run after a cut run.
	FactsMS int64 `json:"facts_ms,omitempty"`
	RerunMS int64 `json:"rerun_ms,omitempty"`
}

// Failure classes of an EpisodeEnd.
const (
	FailureNone           = ""
	FailureInfrastructure = "infrastructure" // sandbox, engine, model server: not the policy's fault
	FailureAgent          = "agent"          // the policy did not solve it (or hacked)
	FailureGrading        = "grading"        // the grader itself failed
)

// EpisodeEnd is the last event of an episode; it marks the log finished.
type EpisodeEnd struct {
	Resolved bool    `json:"resolved"`
	Reward   float64 `json:"reward"`
	Hacked   bool    `json:"hacked"` // a confirmed hack or a blocked call happened
	// Label is LabelHacked, LabelUnconfirmed (a suspicious flag no judge
	// confirmed or cleared: never a clean episode) or LabelClean. Logs
	// written before it existed have none; Label derives it.
	Label        string `json:"label,omitempty"`
	FailureClass string `json:"failure_class"`
	Reason       string `json:"reason,omitempty"`
	Counts       Counts `json:"counts"`
	DurationMS   int64  `json:"duration_ms,omitempty"`
	// TaskID and GroupID repeat EpisodeStart's, so a reader of the
	// finished feed (a trainer gathering a group's rewards, the dashboard's
	// per-task figures) need not open the logs.
	TaskID  string `json:"task_id,omitempty"`
	GroupID string `json:"group_id,omitempty"`
}

// Labels of an episode (EpisodeEnd.Label, Outcome.Label, Sample.Label).
const (
	LabelHacked      = "hacked"
	LabelUnconfirmed = "unconfirmed"
	LabelClean       = "clean"
)

// EpisodeLabel is the label of an episode that was (or was not) hacked and
// had unconfirmed flagged calls.
func EpisodeLabel(hacked bool, unconfirmed int) string {
	switch {
	case hacked:
		return LabelHacked
	case unconfirmed > 0:
		return LabelUnconfirmed
	}
	return LabelClean
}

// Counts summarize an episode.
type Counts struct {
	Turns     int `json:"turns"`
	ToolCalls int `json:"tool_calls"`
	Flagged   int `json:"flagged"`
	// Unconfirmed are flagged calls that ran with no judge's word.
	Unconfirmed int `json:"unconfirmed,omitempty"`
	Blocked     int `json:"blocked"`
	Rewritten   int `json:"rewritten"`
	Segments    int `json:"segments"`
	Tokens      int `json:"tokens"`
}

// SegmentEnd is an item of the finished feed: segment Segment of the
// episode spans log offsets [First, Last].
type SegmentEnd struct {
	Segment int   `json:"segment"`
	First   int64 `json:"first"`
	Last    int64 `json:"last"`
	// By is TypeCompaction or TypeEpisodeEnd.
	By string `json:"by"`
}
