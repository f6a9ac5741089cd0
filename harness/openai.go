package harness

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	openai "github.com/sashabaranov/go-openai"

	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// Defaults of OpenAIConfig.
const (
	DefaultContextBudget  = 24000
	DefaultMaxConsecutive = 3
	DefaultModelRetries   = 3
	DefaultRetryBackoff   = 500 * time.Millisecond
	DefaultRequestTimeout = 5 * time.Minute
)

// OpenAIConfig configures the built-in agent loop against an
// OpenAI-compatible chat-completions endpoint (vLLM, SGLang, OpenAI).
type OpenAIConfig struct {
	// BaseURL of the API including /v1, e.g. http://127.0.0.1:8000/v1. Required.
	BaseURL string
	// Model the server serves. Required.
	Model  string
	APIKey string
	// Temperature of sampling. Zero is sent as the server's default.
	Temperature float32
	// MaxCompletionTokens caps one model turn. Zero: the server's default.
	MaxCompletionTokens int
	// Logprobs asks for the completion tokens' log probabilities (and
	// TopLogprobs alternatives, 0-20). They are recorded exactly as served.
	Logprobs    bool
	TopLogprobs int
	// TokenIDs asks the server for prompt and completion token ids and
	// logprobs in its own dialect: trajectory.TokensVLLM
	// (return_token_ids; the default when ""), trajectory.TokensSGLang
	// (return_logprob) or trajectory.TokensOff. Whatever the server
	// returns is recorded; a server that refuses the fields (a 400 naming
	// them) is asked once more without them, and never again, and its
	// turns are marked tokens_unavailable.
	TokenIDs string
	// Extra fields merged into every request body, for server extensions
	// (e.g. {"return_tokens_as_token_ids": true} for vLLM); they win over
	// TokenIDs' fields.
	Extra map[string]any
	// ContextBudget is the conversation size in tokens past which the
	// policy compacts it into a summary and starts a new segment. Server
	// usage counts are used when present, else len/4. Zero: 24000;
	// negative: never compact.
	ContextBudget int
	// MaxConsecutive is how many unusable replies in a row (malformed tool
	// calls, no tool call, a server error after retries) end the episode.
	// Zero: 3.
	MaxConsecutive int
	// Retries of one request on 429, 5xx and connection errors, with
	// exponential backoff from RetryBackoff. Zero: 3; negative: none.
	Retries      int
	RetryBackoff time.Duration
	// RequestTimeout bounds one request. Zero: 5m.
	RequestTimeout time.Duration
	// PromptDir holds system.tmpl, task.tmpl, compact.tmpl and resume.tmpl
	// overriding the embedded ones (text/template over PromptData).
	PromptDir  string
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Validate reports a configuration that cannot work.
func (c OpenAIConfig) Validate() error {
	u, err := url.Parse(c.BaseURL)
	switch {
	case c.BaseURL == "":
		return errors.New("harness: openai: BaseURL is empty: give the OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("harness: openai: BaseURL %q is not an http(s) URL: use e.g. http://127.0.0.1:8000/v1", c.BaseURL)
	case c.Model == "":
		return errors.New("harness: openai: Model is empty: name a model the server serves")
	case tokenModeErr(c.TokenIDs) != nil:
		return fmt.Errorf("harness: openai: %w", tokenModeErr(c.TokenIDs))
	case c.TopLogprobs < 0 || c.TopLogprobs > 20:
		return fmt.Errorf("harness: openai: TopLogprobs %d outside [0, 20]", c.TopLogprobs)
	case c.MaxCompletionTokens < 0 || c.MaxConsecutive < 0 || c.RetryBackoff < 0 || c.RequestTimeout < 0:
		return errors.New("harness: openai: MaxCompletionTokens, MaxConsecutive, RetryBackoff and RequestTimeout must not be negative: use 0 for the defaults")
	}
	return nil
}

// OpenAI is the built-in agent loop. One OpenAI serves any number of
// episodes at once; each Run keeps its conversation to itself.
type OpenAI struct {
	cfg     OpenAIConfig
	client  *openai.Client
	prompts prompts
	log     *slog.Logger
}

var _ Policy = (*OpenAI)(nil)

// NewOpenAI returns the agent loop for cfg.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.ContextBudget = cmp.Or(cfg.ContextBudget, DefaultContextBudget)
	cfg.MaxConsecutive = cmp.Or(cfg.MaxConsecutive, DefaultMaxConsecutive)
	cfg.Retries = max(cmp.Or(cfg.Retries, DefaultModelRetries), 0) // negative: none
	cfg.RetryBackoff = cmp.Or(cfg.RetryBackoff, DefaultRetryBackoff)
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout)
	p, err := loadPrompts(cfg.PromptDir)
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 64}}
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	tokens, _ := trajectory.TokenFields(cfg.TokenIDs)
	extra := map[string]json.RawMessage{}
	for k, v := range cfg.Extra {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("harness: openai: Extra[%q]: %w", k, err)
		}
		extra[k] = b
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	oc.HTTPClient = &captureDoer{base: hc, extra: extra, tokens: tokens, log: log}
	return &OpenAI{cfg: cfg, client: openai.NewClientWithConfig(oc), prompts: p, log: log}, nil
}

// toolDefs are the tools offered to the model: monitor's registry, as the
// gateway and MCP offer them.
var toolDefs = func() []openai.Tool {
	var out []openai.Tool
	for _, t := range toolcall.Tools() {
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: t.Schema}})
	}
	return out
}()

// toolList names the tools in messages to the model.
var toolList = toolcall.ToolNames()

// Run plays the episode: ask the model, run its tool calls through the
// episode, feed the outputs back, until it submits, a limit is hit, or its
// replies stay unusable.
func (o *OpenAI) Run(ctx context.Context, ep *Episode) (string, error) {
	data := PromptData{Task: ep.Task(), Workdir: workdirOf(ep.Task()), Tools: toolList}
	msgs, err := o.opening(data, PromptTask)
	if err != nil {
		return ReasonModelError, err
	}
	return o.loop(ctx, ep, &loopState{data: data, msgs: msgs, size: estimateConv(msgs), seen: map[string]bool{}})
}

// loopState is where the agent loop stands: what a tree rollout's fork
// copies to go on from there.
type loopState struct {
	data                  PromptData
	msgs                  []trajectory.Message
	size                  int // conversation size in tokens
	bad, serverErrs, turn int
	lastBad               string
	seen                  map[string]bool // tool-call ids used
}

func (s *loopState) clone() *loopState {
	c := *s
	c.msgs, c.seen = slices.Clone(s.msgs), maps.Clone(s.seen)
	return &c
}

// loop runs the agent loop from st on; at each turn boundary a tree
// rollout may branch it (Episode.Branch), each fork going on from a copy.
func (o *OpenAI) loop(ctx context.Context, ep *Episode, st *loopState) (string, error) {
	log := o.log.With("episode_id", ep.ID())
	data := st.data
	for {
		ep.Branch(func(child *Episode) func(context.Context) (string, error) {
			cs := st.clone()
			return func(ctx context.Context) (string, error) { return o.loop(ctx, child, cs) }
		})
		if r := ep.Limit(); r != "" {
			return r, nil
		}
		st.turn++
		mt, err := o.complete(ctx, st.msgs, true)
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			st.serverErrs++
			log.Warn("model request failed", "err", err, "consecutive", st.serverErrs)
			if st.serverErrs >= o.cfg.MaxConsecutive || !retryable(err) {
				return ReasonModelError, err
			}
			continue
		}
		st.serverErrs = 0
		// Tool-call ids must be unique within the episode (they key the
		// sandbox's idempotency cache); servers that repeat them get ours.
		for i := range mt.Response.ToolCalls {
			tc := &mt.Response.ToolCalls[i]
			if tc.ID == "" || st.seen[tc.ID] {
				tc.ID = fmt.Sprintf("call_%d_%d", st.turn, i)
			}
			st.seen[tc.ID] = true
		}
		if err := ep.RecordModelTurn(mt); err != nil {
			return ReasonSandbox, err
		}
		st.msgs = append(st.msgs, mt.Response)
		if mt.Usage.TotalTokens > 0 {
			st.size = mt.Usage.TotalTokens
		} else {
			st.size += estimateTokens(mt.Response)
		}

		var obs []trajectory.Message
		usable := false
		if len(mt.Response.ToolCalls) == 0 {
			if strings.TrimSpace(mt.Response.Content) == "" {
				st.lastBad = ReasonMalformed
				obs = append(obs, trajectory.Message{Role: trajectory.RoleUser, Content: "error: your reply was empty; call one of the tools (" + toolList + ")"})
			} else {
				st.lastBad = ReasonNoSubmit
				obs = append(obs, trajectory.Message{Role: trajectory.RoleUser, Content: "error: your reply called no tool; call one of the tools (" + toolList + "), and submit when you are done"})
			}
		}
		for _, tc := range mt.Response.ToolCalls {
			out, ok, stop, err := o.callTool(ctx, ep, tc)
			if stop != "" || err != nil {
				return stop, err
			}
			if ok {
				usable = true
			} else {
				st.lastBad = ReasonMalformed
			}
			obs = append(obs, trajectory.Message{Role: trajectory.RoleTool, ToolCallID: tc.ID, Name: tc.Function.Name, Content: out})
		}
		st.msgs = append(st.msgs, obs...)
		st.size += estimateConv(obs)
		if usable {
			st.bad = 0
		} else if st.bad++; st.bad >= o.cfg.MaxConsecutive {
			return st.lastBad, nil
		}
		if o.cfg.ContextBudget > 0 && st.size > o.cfg.ContextBudget {
			if r := ep.Limit(); r != "" {
				return r, nil
			}
			st.msgs, err = o.compact(ctx, ep, st.msgs, data, st.size)
			if err != nil {
				if ctx.Err() != nil {
					return "", ctx.Err()
				}
				return ReasonModelError, err
			}
			st.size = estimateConv(st.msgs)
			log.Info("compacted", "segment", ep.Segment())
		}
	}
}

// callTool runs one tool call of the model. ok is false for a malformed
// call (its output then says what was wrong); stop is set when the episode
// must end (submit, a limit, a fault).
func (o *OpenAI) callTool(ctx context.Context, ep *Episode, tc trajectory.FunctionCall) (out string, ok bool, stop string, err error) {
	name := tc.Function.Name
	if !toolcall.IsTool(name) {
		return fmt.Sprintf("error: unknown tool %q; call one of the tools (%s)", name, toolList), false, "", nil
	}
	args := strings.TrimSpace(tc.Function.Arguments)
	args = cmp.Or(args, "{}")
	var obj map[string]json.RawMessage
	if jerr := json.Unmarshal([]byte(args), &obj); jerr != nil {
		return fmt.Sprintf("error: the arguments of %s are not a valid JSON object (%v); call one of the tools (%s) with JSON arguments", name, jerr, toolList), false, "", nil
	}
	res, err := ep.Call(ctx, toolcall.Call{Tool: name, Args: json.RawMessage(args), RequestID: tc.ID})
	switch {
	case err == nil:
	case LimitReason(err) != "":
		return "", false, LimitReason(err), nil
	case errors.Is(err, ErrFinished):
		return "", false, ReasonCancelled, nil
	case ctx.Err() != nil:
		return "", false, "", ctx.Err()
	default:
		return "", false, sandboxReason(err), err
	}
	if res.Submit {
		return res.Output, true, ReasonSubmit, nil
	}
	out = res.Output
	if res.ExitCode != 0 && name == toolcall.Bash {
		out += fmt.Sprintf("\n[exit code %d]", res.ExitCode)
	}
	return out, true, "", nil
}

func (o *OpenAI) opening(d PromptData, user string) ([]trajectory.Message, error) {
	sys, err := o.prompts.render(PromptSystem, d)
	if err != nil {
		return nil, err
	}
	u, err := o.prompts.render(user, d)
	if err != nil {
		return nil, err
	}
	return []trajectory.Message{{Role: trajectory.RoleSystem, Content: sys}, {Role: trajectory.RoleUser, Content: u}}, nil
}

// compact asks the model for a summary (recorded as the old segment's last
// turn), opens the next segment and returns its opening conversation.
func (o *OpenAI) compact(ctx context.Context, ep *Episode, msgs []trajectory.Message, d PromptData, size int) ([]trajectory.Message, error) {
	ask, err := o.prompts.render(PromptCompact, d)
	if err != nil {
		return nil, err
	}
	req := append(msgs[:len(msgs):len(msgs)], trajectory.Message{Role: trajectory.RoleUser, Content: ask})
	mt, err := o.complete(ctx, req, false)
	if err != nil {
		return nil, fmt.Errorf("harness: compaction: %w", err)
	}
	if err := ep.RecordModelTurn(mt); err != nil {
		return nil, err
	}
	d.Summary = strings.TrimSpace(mt.Response.Content)
	if _, err := ep.Compact(d.Summary, size); err != nil {
		return nil, err
	}
	return o.opening(d, PromptResume)
}

// complete makes one chat-completions request with retries and returns it
// as a model turn: the request's messages, the response message, and the
// token ids and logprobs exactly as the server sent them.
func (o *OpenAI) complete(ctx context.Context, msgs []trajectory.Message, tools bool) (trajectory.ModelTurn, error) {
	req := openai.ChatCompletionRequest{
		Model: o.cfg.Model, Messages: toOpenAI(msgs), Temperature: o.cfg.Temperature,
		MaxCompletionTokens: o.cfg.MaxCompletionTokens, LogProbs: o.cfg.Logprobs, TopLogProbs: o.cfg.TopLogprobs,
	}
	if tools {
		req.Tools = toolDefs
	}
	var lastErr error
	// The nth wait is in [d/2, d] for d = RetryBackoff·2ⁿ⁻¹, at most 64
	// times it (centred on 3d/4, ±d/4), so that episodes that failed
	// together spread out.
	b := o.cfg.RetryBackoff * 3 / 4
	bo := &backoff.ExponentialBackOff{InitialInterval: b, RandomizationFactor: 1.0 / 3, Multiplier: 2, MaxInterval: 64 * b}
	for attempt := 0; attempt <= o.cfg.Retries; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(ctx, bo.NextBackOff()); err != nil {
				return trajectory.ModelTurn{}, err
			}
		}
		var cap capture
		rctx, cancel := context.WithTimeout(context.WithValue(ctx, captureKey{}, &cap), o.cfg.RequestTimeout)
		t0 := time.Now()
		resp, err := o.client.CreateChatCompletion(rctx, req)
		cancel()
		if err != nil {
			lastErr = fmt.Errorf("harness: model %s: %w", o.cfg.Model, err)
			if ctx.Err() != nil || !retryable(err) {
				return trajectory.ModelTurn{}, lastErr
			}
			continue
		}
		if len(resp.Choices) == 0 {
			lastErr = fmt.Errorf("harness: model %s: response has no choices", o.cfg.Model)
			continue
		}
		ch := resp.Choices[0]
		mt := trajectory.ModelTurn{
			Model:        cmpOr(resp.Model, o.cfg.Model),
			Request:      msgs,
			Response:     fromOpenAI(ch.Message),
			FinishReason: string(ch.FinishReason),
			Usage:        trajectory.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens, TotalTokens: resp.Usage.TotalTokens},
			LatencyMS:    time.Since(t0).Milliseconds(),
		}
		mt.Response.Role = trajectory.RoleAssistant
		mt.Tools, mt.Params = trajectory.RequestParts(cap.request)
		mt.TokensUnavailable = cap.unavailable
		var served trajectory.Served
		served.Add(cap.response)
		served.Fill(&mt)
		return mt, nil
	}
	return trajectory.ModelTurn{}, lastErr
}

// retryable: 429, 5xx, connection failures and timeouts; not other 4xx.
func retryable(err error) bool {
	var ae *openai.APIError
	if errors.As(err, &ae) {
		return ae.HTTPStatusCode == 429 || ae.HTTPStatusCode >= 500
	}
	var re *openai.RequestError
	if errors.As(err, &re) {
		return re.HTTPStatusCode == 429 || re.HTTPStatusCode >= 500
	}
	return true // transport errors, timeouts, undecodable bodies
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func toOpenAI(msgs []trajectory.Message) []openai.ChatCompletionMessage {
	out := make([]openai.ChatCompletionMessage, len(msgs))
	for i, m := range msgs {
		om := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{ID: tc.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
		out[i] = om
	}
	return out
}

func fromOpenAI(m openai.ChatCompletionMessage) trajectory.Message {
	out := trajectory.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, trajectory.FunctionCall{ID: tc.ID, Type: "function",
			Function: trajectory.Function{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
	}
	return out
}

func estimateConv(msgs []trajectory.Message) int {
	n := 0
	for _, m := range msgs {
		n += estimateTokens(m) + 4 // per-message framing
	}
	return n
}

type captureKey struct{}

// capture is what captureDoer keeps of one request: the body sent (after
// the extra fields were merged), the response body received and, when
// the server refused the token-id fields, why (ModelTurn.TokensUnavailable).
type capture struct {
	request, response []byte
	unavailable       string
}

// captureDoer sits under go-openai: it merges the extra fields and the
// token-id fields into request bodies and keeps the bodies sent and
// received for the caller that asked (via the request context), so that
// fields go-openai does not know (tools as sent, token ids) are recorded
// exactly. A server that refuses the token-id fields (a 400 naming them)
// is asked once more without them, and never again with them.
type captureDoer struct {
	base    *http.Client
	extra   map[string]json.RawMessage // OpenAIConfig.Extra
	tokens  map[string]json.RawMessage // OpenAIConfig.TokenIDs' fields
	log     *slog.Logger
	refused atomic.Pointer[string] // why the server refused tokens
}

func (d *captureDoer) Do(req *http.Request) (*http.Response, error) {
	slot, _ := req.Context().Value(captureKey{}).(*capture)
	if slot == nil {
		slot = &capture{}
	}
	var (
		plain []byte // the body without the token-id fields
		added []string
	)
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		b = trajectory.WithFields(b, d.extra)
		if why := d.refused.Load(); why != nil {
			slot.unavailable = *why
		} else if with, fields := trajectory.AddFields(b, d.tokens); len(fields) > 0 {
			plain, b, added = b, with, fields
		}
		setBody(req, b)
	}
	resp, err := d.base.Do(req)
	if err != nil {
		return resp, err
	}
	if len(added) > 0 && resp.StatusCode == http.StatusBadRequest {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		why := trajectory.RefusedFields(resp.StatusCode, data, added)
		if why == "" {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(data), resp.Body), resp.Body}
			return resp, nil
		}
		resp.Body.Close()
		d.log.Warn("model server refuses token-id fields: its turns will have no token ids", "err", why)
		d.refused.CompareAndSwap(nil, &why)
		slot.unavailable = why
		req = req.Clone(req.Context())
		setBody(req, plain)
		if resp, err = d.base.Do(req); err != nil {
			return resp, err
		}
	}
	if req.GetBody != nil {
		body, _ := req.GetBody()
		slot.request, _ = io.ReadAll(body)
	}
	if resp.StatusCode/100 == 2 {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		slot.response = b
		resp.Body = io.NopCloser(bytes.NewReader(b))
	}
	return resp, nil
}

// setBody makes b the request's body.
func setBody(req *http.Request, b []byte) {
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.ContentLength = int64(len(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

func tokenModeErr(mode string) error {
	_, err := trajectory.TokenFields(mode)
	return err
}
