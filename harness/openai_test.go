package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/internal/memnet"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// reply is one scripted answer of the fake chat-completions server.
type reply struct {
	status    int // 0: 200
	content   string
	calls     [][3]string // id, name, arguments
	usage     *[3]int     // prompt, completion, total
	tokenIDs  []int64     // sent as choices[0].token_ids
	logprobs  []float64   // sent as logprobs.content[].logprob
	asTokenID bool        // logprobs tokens are "token_id:N" for tokenIDs instead
	promptIDs []int64     // sent as prompt_token_ids (vLLM return_token_ids)
	alts      int         // top_logprobs alternatives per position
	sglang    bool        // promptIDs, tokenIDs and logprobs go as SGLang meta_info triples instead
	strict    bool        // refuse a request with return_token_ids, as OpenAI's API refuses unknown fields
	hang      bool        // answer nothing until the client gives up
}

// fakeLLM is an OpenAI-compatible server speaking the real wire format,
// answering with its script in order (the last reply repeats). Like the
// real servers it returns token ids and logprobs only when asked:
// vLLM's return_token_ids, OpenAI's logprobs, SGLang's return_logprob.
type fakeLLM struct {
	t       testing.TB
	replies []reply
	base    string                 // the server's URL
	client  *http.Client           // reaches base; nil: the default
	waits   func() []time.Duration // memnet.Server.Waits; nil on loopback

	mu   sync.Mutex
	reqs []map[string]any // request bodies; guarded by mu
}

func newFakeLLM(t testing.TB, replies ...reply) *fakeLLM {
	f := &fakeLLM{t: t, replies: replies}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.base = srv.URL
	return f
}

// newBubbleLLM is newFakeLLM on memnet, for a test in a synctest bubble.
func newBubbleLLM(t testing.TB, replies ...reply) *fakeLLM {
	f := &fakeLLM{t: t, replies: replies}
	srv := memnet.NewServer(t, http.HandlerFunc(f.serve))
	f.base, f.client, f.waits = srv.URL, srv.Client, srv.Waits
	return f
}

func (f *fakeLLM) url() string { return f.base + "/v1" }

func (f *fakeLLM) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

func (f *fakeLLM) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, body)
	f.mu.Unlock()
	rp := f.replies[min(n, len(f.replies)-1)]
	if rp.hang {
		<-r.Context().Done()
		return
	}
	if _, ok := body["return_token_ids"]; ok && rp.strict {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"Unrecognized request argument supplied: return_token_ids","type":"invalid_request_error","param":null,"code":null}}`)
		return
	}
	switch {
	case rp.sglang && body["return_logprob"] != true:
		rp.sglang, rp.promptIDs, rp.tokenIDs, rp.logprobs = false, nil, nil, nil
	case rp.sglang:
	default:
		if body["return_token_ids"] != true {
			rp.promptIDs = nil
			if !rp.asTokenID {
				rp.tokenIDs = nil
			}
		}
		if body["logprobs"] != true {
			rp.logprobs = nil
		}
	}
	if rp.status != 0 && rp.status != 200 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rp.status)
		fmt.Fprintf(w, `{"error":{"message":"scripted failure %d","type":"server_error","code":null}}`, rp.status)
		return
	}
	msg := map[string]any{"role": "assistant", "content": rp.content}
	finish := "stop"
	if len(rp.calls) > 0 {
		var tcs []any
		for _, c := range rp.calls {
			tcs = append(tcs, map[string]any{"id": c[0], "type": "function", "function": map[string]any{"name": c[1], "arguments": c[2]}})
		}
		msg["tool_calls"] = tcs
		finish = "tool_calls"
	}
	choice := map[string]any{"index": 0, "message": msg, "finish_reason": finish}
	if rp.sglang {
		var in, out []any
		for i, id := range rp.promptIDs {
			var lp any = -1.0
			if i == 0 {
				lp = nil // SGLang has no logprob for the first prompt token
			}
			in = append(in, []any{lp, id, nil})
		}
		for i, id := range rp.tokenIDs {
			out = append(out, []any{rp.logprobs[i], id, fmt.Sprintf("t%d", i)})
		}
		resp := map[string]any{"id": "s", "object": "chat.completion", "model": "fake-model", "choices": []any{choice},
			"meta_info": map[string]any{"input_token_logprobs": in, "output_token_logprobs": out}}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
		return
	}
	if rp.tokenIDs != nil && !rp.asTokenID {
		choice["token_ids"] = rp.tokenIDs
	}
	if rp.logprobs != nil {
		var content []any
		for i, lp := range rp.logprobs {
			tok := fmt.Sprintf("t%d", i)
			if rp.asTokenID {
				tok = fmt.Sprintf("token_id:%d", rp.tokenIDs[i])
			}
			top := []any{}
			for k := range rp.alts {
				top = append(top, map[string]any{"token": fmt.Sprintf("%s~%d", tok, k), "logprob": lp - float64(k)})
			}
			content = append(content, map[string]any{"token": tok, "logprob": lp, "top_logprobs": top})
		}
		choice["logprobs"] = map[string]any{"content": content}
	}
	resp := map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": "fake-model",
		"choices": []any{choice}}
	if rp.promptIDs != nil {
		resp["prompt_token_ids"] = rp.promptIDs
	}
	if rp.usage != nil {
		resp["usage"] = map[string]any{"prompt_tokens": rp.usage[0], "completion_tokens": rp.usage[1], "total_tokens": rp.usage[2]}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

func toolCall(id, name, args string) reply { return reply{calls: [][3]string{{id, name, args}}} }

// lastMessage returns the role and content of a request's last message.
func lastMessage(t testing.TB, body map[string]any) (string, string) {
	t.Helper()
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		t.Fatalf("request without messages: %v", body)
	}
	m := msgs[len(msgs)-1].(map[string]any)
	c, _ := m["content"].(string)
	return m["role"].(string), c
}

func newTestOpenAI(t testing.TB, llm *fakeLLM, mod func(*OpenAIConfig)) *OpenAI {
	t.Helper()
	cfg := OpenAIConfig{BaseURL: llm.url(), Model: "fake-model", Retries: -1, RetryBackoff: time.Millisecond, HTTPClient: llm.client}
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpenAILoopRecoversFromBadOutput(t *testing.T) {
	submit := toolCall("call_s", "submit", `{"message":"done"}`)
	submit.tokenIDs, submit.logprobs, submit.asTokenID = []int64{7, 8}, []float64{-1.5, -0.0625}, true
	good := toolCall("call_b", "bash", `{"command":"echo hi"}`)
	good.tokenIDs, good.logprobs = []int64{101, 102, 103}, []float64{-0.5, -0.25, -0.125}
	good.usage = &[3]int{50, 3, 53}
	cut := toolCall("call_1", "bash", `{"command": "echo hi"`)
	cut.usage = &[3]int{40, 2, 42}
	unknown := toolCall("call_2", "browse", `{"url":"x"}`)
	unknown.usage = &[3]int{45, 4, 49}
	submit.usage = &[3]int{60, 5, 65}
	llm := newFakeLLM(t,
		reply{status: 500},
		cut,                              // JSON cut short
		unknown,                          // unknown tool
		reply{usage: &[3]int{47, 1, 48}}, // empty message
		good,
		submit,
	)
	p := newTestOpenAI(t, llm, func(c *OpenAIConfig) {
		c.MaxConsecutive = 4
		c.Logprobs, c.TopLogprobs = true, 2
		c.Extra = map[string]any{"return_token_ids": true}
	})
	be := &fake.Backend{}
	r, st := testRunner(t, be, Limits{})
	o, err := r.Run(context.Background(), fakeTask, fakeHidden, EpisodeMeta{Model: "fake-model"}, p)
	if err != nil {
		t.Fatal(err)
	}
	want := Outcome{TaskID: fakeTask.ID, Resolved: true, Reward: 1, Passed: 3, Label: LabelClean, CleanResolution: true,
		Steps: 2, Segments: 1, Tokens: 2 + 4 + 1 + 3 + 5, Reason: ReasonSubmit}
	ignore := cmpIgnoreOutcome()
	if diff := cmp.Diff(want, o, ignore); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}

	reqs := llm.requests()
	if len(reqs) != 6 {
		t.Fatalf("got %d requests, want 6", len(reqs))
	}
	for i, body := range reqs {
		if body["return_token_ids"] != true || body["logprobs"] != true || body["top_logprobs"] != float64(2) {
			t.Errorf("request %d: extras and logprobs not sent: %v %v %v", i, body["return_token_ids"], body["logprobs"], body["top_logprobs"])
		}
		var names []string
		for _, tl := range body["tools"].([]any) {
			names = append(names, tl.(map[string]any)["function"].(map[string]any)["name"].(string))
		}
		if diff := cmp.Diff([]string{"bash", "read_file", "write_file", "edit", "list_dir", "submit"}, names); diff != "" {
			t.Errorf("request %d tools (-want +got):\n%s", i, diff)
		}
	}
	observations := []struct {
		req      int
		role     string
		contains string
	}{
		{2, "tool", "error: the arguments of bash are not a valid JSON object"},
		{3, "tool", `error: unknown tool "browse"; call one of the tools`},
		{4, "user", "error: your reply was empty; call one of the tools"},
		{5, "tool", "hi\n"},
	}
	for _, ob := range observations {
		role, content := lastMessage(t, reqs[ob.req])
		if role != ob.role || !strings.Contains(content, ob.contains) {
			t.Errorf("request %d: last message %s %q, want %s containing %q", ob.req, role, content, ob.role, ob.contains)
		}
	}
	if got := be.Created()[0].Commands(); !slices.Equal(got, []string{"echo hi"}) {
		t.Errorf("sandbox ran %q, want only the one well-formed call", got)
	}

	// Token ids and logprobs are recorded exactly as served.
	var got [][2]any
	for _, ev := range events(t, st, o.EpisodeID) {
		if ev.Type != trajectory.TypeModelTurn {
			continue
		}
		var mt trajectory.ModelTurn
		if err := ev.Decode(&mt); err != nil {
			t.Fatal(err)
		}
		if mt.TokenIDs != nil || mt.Logprobs != nil {
			got = append(got, [2]any{mt.TokenIDs, mt.Logprobs})
		}
	}
	wantTok := [][2]any{
		{[]int64{101, 102, 103}, []float64{-0.5, -0.25, -0.125}},
		{[]int64{7, 8}, []float64{-1.5, -0.0625}},
	}
	if diff := cmp.Diff(wantTok, got); diff != "" {
		t.Errorf("recorded tokens (-want +got):\n%s", diff)
	}
}

// TestOpenAIRecordsTurn: with TokenIDs vllm the loop asks for ids and
// logprobs, and records the tools list and sampling parameters as sent and
// prompt ids, completion ids, logprobs, token strings and alternatives as
// served.
func TestOpenAIRecordsTurn(t *testing.T) {
	submit := toolCall("call_s", "submit", `{}`)
	submit.promptIDs, submit.tokenIDs, submit.logprobs, submit.alts = []int64{1, 2, 3}, []int64{7, 8}, []float64{-0.5, -0.25}, 2
	llm := newFakeLLM(t, submit)
	p := newTestOpenAI(t, llm, func(c *OpenAIConfig) {
		c.TokenIDs, c.Temperature, c.TopLogprobs, c.MaxCompletionTokens = trajectory.TokensVLLM, 0.5, 2, 64
	})
	r, st := testRunner(t, &fake.Backend{}, Limits{})
	o, err := r.Run(context.Background(), fakeTask, fakeHidden, EpisodeMeta{Model: "fake-model"}, p)
	if err != nil {
		t.Fatal(err)
	}
	body := llm.requests()[0]
	if body["return_token_ids"] != true || body["logprobs"] != true {
		t.Errorf("request did not ask for token ids and logprobs: %v", body)
	}
	mt := modelTurn(t, st, o.EpisodeID)
	// The tools sent are monitor's registry (as the gateway and MCP offer
	// them), and the turn records what was sent.
	var wantTools []any
	for _, tl := range toolcall.Tools() {
		var schema any
		if err := json.Unmarshal(tl.Schema, &schema); err != nil {
			t.Fatal(err)
		}
		wantTools = append(wantTools, map[string]any{"type": "function", "function": map[string]any{
			"name": tl.Name, "description": tl.Description, "parameters": schema}})
	}
	if d := cmp.Diff(wantTools, body["tools"]); d != "" {
		t.Errorf("tools sent differ from the registry (-want +got):\n%s", d)
	}
	if sys, _ := body["messages"].([]any)[0].(map[string]any)["content"].(string); !strings.Contains(sys, "the tools: "+toolcall.ToolNames()+".") {
		t.Errorf("the system prompt does not name the tools sent (%s):\n%s", toolcall.ToolNames(), sys)
	}
	var recorded []any
	if err := json.Unmarshal(mt.Tools, &recorded); err != nil {
		t.Fatalf("recorded tools %s: %v", mt.Tools, err)
	}
	if d := cmp.Diff(wantTools, recorded); d != "" {
		t.Errorf("recorded tools differ from those sent (-want +got):\n%s", d)
	}
	var params map[string]any
	if err := json.Unmarshal(mt.Params, &params); err != nil {
		t.Fatalf("recorded params %s: %v", mt.Params, err)
	}
	for k, v := range map[string]any{"temperature": 0.5, "top_logprobs": float64(2), "max_completion_tokens": float64(64), "return_token_ids": true, "logprobs": true} {
		if params[k] != v {
			t.Errorf("params[%s] = %v, want %v (params %s)", k, params[k], v, mt.Params)
		}
	}
	if _, ok := params["messages"]; ok {
		t.Errorf("params repeat the messages: %s", mt.Params)
	}
	want := trajectory.ModelTurn{PromptTokenIDs: []int64{1, 2, 3}, TokenIDs: []int64{7, 8}, Logprobs: []float64{-0.5, -0.25}, Tokens: []string{"t0", "t1"},
		TopLogprobs: [][]trajectory.TopLogprob{{{Token: "t0~0", Logprob: -0.5}, {Token: "t0~1", Logprob: -1.5}}, {{Token: "t1~0", Logprob: -0.25}, {Token: "t1~1", Logprob: -1.25}}}}
	got := trajectory.ModelTurn{PromptTokenIDs: mt.PromptTokenIDs, TokenIDs: mt.TokenIDs, Logprobs: mt.Logprobs, Tokens: mt.Tokens, TopLogprobs: mt.TopLogprobs}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("recorded tokens (-want +got):\n%s", d)
	}
}

// TestOpenAIRecordsSGLang: with TokenIDs sglang the loop asks for
// return_logprob from the first prompt token and records the ids SGLang's
// meta_info triples carry.
func TestOpenAIRecordsSGLang(t *testing.T) {
	submit := toolCall("call_s", "submit", `{}`)
	submit.sglang, submit.promptIDs, submit.tokenIDs, submit.logprobs = true, []int64{1, 2, 3}, []int64{7, 8}, []float64{-0.5, -0.25}
	llm := newFakeLLM(t, submit)
	p := newTestOpenAI(t, llm, func(c *OpenAIConfig) { c.TokenIDs = trajectory.TokensSGLang })
	r, st := testRunner(t, &fake.Backend{}, Limits{})
	o, err := r.Run(context.Background(), fakeTask, fakeHidden, EpisodeMeta{}, p)
	if err != nil {
		t.Fatal(err)
	}
	body := llm.requests()[0]
	if body["return_logprob"] != true || body["logprob_start_len"] != float64(0) || body["return_text_in_logprobs"] != true {
		t.Errorf("request did not ask SGLang for logprobs with ids: %v", body)
	}
	mt := modelTurn(t, st, o.EpisodeID)
	want := trajectory.ModelTurn{PromptTokenIDs: []int64{1, 2, 3}, TokenIDs: []int64{7, 8}, Logprobs: []float64{-0.5, -0.25}, Tokens: []string{"t0", "t1"}}
	got := trajectory.ModelTurn{PromptTokenIDs: mt.PromptTokenIDs, TokenIDs: mt.TokenIDs, Logprobs: mt.Logprobs, Tokens: mt.Tokens, TopLogprobs: mt.TopLogprobs}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("recorded tokens (-want +got):\n%s", d)
	}
}

// TestOpenAITokenIDs: the loop asks for token ids by default (vLLM's
// fields), so a server that returns them only when asked gives
// token-exact samples; a server that refuses the fields is asked once
// more without them and never again, its turns marked
// tokens_unavailable and its samples "unavailable"; off asks for none.
func TestOpenAITokenIDs(t *testing.T) {
	tests := []struct {
		name   string
		mode   string
		strict bool
		asked  []bool // return_token_ids in each request to the server
		tokens string // the samples' tokens state
		why    string // each turn's TokensUnavailable
	}{
		{"default asks", "", false, []bool{true, true}, trajectory.TokenIDsPresent, ""},
		{"off", trajectory.TokensOff, false, []bool{false, false}, trajectory.TokenIDsAbsent, ""},
		{"refused: retried once without", "", true, []bool{true, false, false}, trajectory.TokenIDsUnavailable,
			"the model server refused logprobs, return_token_ids (400: Unrecognized request argument supplied: return_token_ids)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			look := toolCall("call_1", "bash", `{"command":"ls"}`)
			look.promptIDs, look.tokenIDs, look.logprobs, look.strict = []int64{1, 2}, []int64{3}, []float64{-0.5}, tc.strict
			submit := toolCall("call_s", "submit", `{}`)
			submit.promptIDs, submit.tokenIDs, submit.logprobs, submit.strict = []int64{1, 2, 3, 4}, []int64{5}, []float64{-0.25}, tc.strict
			replies := []reply{look, submit}
			if tc.strict {
				replies = []reply{look, look, submit} // the refused request, its retry, the next turn
			}
			llm := newFakeLLM(t, replies...)
			p := newTestOpenAI(t, llm, func(c *OpenAIConfig) { c.TokenIDs = tc.mode })
			r, st := testRunner(t, &fake.Backend{}, Limits{})
			o, err := r.Run(context.Background(), fakeTask, fakeHidden, EpisodeMeta{}, p)
			if err != nil {
				t.Fatal(err)
			}
			var asked []bool
			for _, b := range llm.requests() {
				_, ok := b["return_token_ids"]
				asked = append(asked, ok)
			}
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("return_token_ids in the requests: %v, want %v", asked, tc.asked)
			}
			evs := events(t, st, o.EpisodeID)
			mts := harnesstest.Payloads[trajectory.ModelTurn](t, evs, trajectory.TypeModelTurn)
			if len(mts) != 2 {
				t.Fatalf("%d model turns, want 2", len(mts))
			}
			for i, mt := range mts {
				if mt.TokensUnavailable != tc.why {
					t.Errorf("turn %d: tokens_unavailable %q, want %q", i, mt.TokensUnavailable, tc.why)
				}
			}
			ss, err := trajectory.Samples(evs)
			if err != nil || len(ss) == 0 {
				t.Fatalf("samples: %v (%d)", err, len(ss))
			}
			for _, s := range ss {
				if s.Tokens != tc.tokens {
					t.Errorf("sample %s: tokens %q, want %q", s.SampleID, s.Tokens, tc.tokens)
				}
			}
		})
	}
}

func TestOpenAIBadTokenMode(t *testing.T) {
	_, err := NewOpenAI(OpenAIConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m", TokenIDs: "tgi"})
	if err == nil || !strings.Contains(err.Error(), "use vllm, sglang or off") {
		t.Errorf("NewOpenAI(TokenIDs tgi) = %v, want an error naming the modes", err)
	}
}

// cmpIgnoreOutcome ignores what varies between runs.
func cmpIgnoreOutcome() cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool {
		switch p.Last().String() {
		case ".EpisodeID", ".Duration", ".Overhead":
			return true
		}
		return false
	}, cmp.Ignore())
}

func TestOpenAIStops(t *testing.T) {
	bash := toolCall("c", "bash", `{"command":"echo again"}`)
	bash.usage = &[3]int{100, 100, 200}
	tests := []struct {
		name     string
		replies  []reply
		limits   Limits
		retries  int
		reason   string
		failure  string
		steps    int
		requests int
	}{
		{"malformed thrice", []reply{toolCall("c", "nope", "{}")}, Limits{}, -1, ReasonMalformed, FailureAgent, 0, 3},
		{"talks without tools", []reply{{content: "I think it works now."}}, Limits{}, -1, ReasonNoSubmit, FailureAgent, 0, 3},
		{"server down", []reply{{status: 503}}, Limits{}, 1, ReasonModelError, FailureInfrastructure, 0, 6},
		{"bad request", []reply{{status: 400}}, Limits{}, 1, ReasonModelError, FailureInfrastructure, 0, 1},
		{"max steps", []reply{bash}, Limits{MaxSteps: 2}, -1, ReasonMaxSteps, FailureAgent, 2, 2},
		{"max tokens", []reply{bash}, Limits{MaxTokens: 150}, -1, ReasonMaxTokens, FailureAgent, 1, 2},
		{"wall time", []reply{bash}, Limits{WallTime: time.Nanosecond}, -1, ReasonWallTime, FailureAgent, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			llm := newFakeLLM(t, tc.replies...)
			p := newTestOpenAI(t, llm, func(c *OpenAIConfig) { c.Retries = tc.retries })
			be := &fake.Backend{Passed: func(*fake.Sandbox) bool { return false }}
			r, st := testRunner(t, be, tc.limits)
			o, err := r.Run(context.Background(), fakeTask, fakeHidden, EpisodeMeta{}, p)
			if err != nil {
				t.Fatal(err)
			}
			if o.Reason != tc.reason || o.FailureClass != tc.failure || o.Steps != tc.steps {
				t.Errorf("outcome reason %q failure %q steps %d, want %q %q %d (error %q)", o.Reason, o.FailureClass, o.Steps,
					tc.reason, tc.failure, tc.steps, o.Error)
			}
			if n := len(llm.requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			types := eventTypes(events(t, st, o.EpisodeID))
			if types[len(types)-1] != trajectory.TypeEpisodeEnd {
				t.Errorf("last event %s, want episode_end", types[len(types)-1])
			}
			// Still graded, unless the failure was the infrastructure's.
			// The hidden tests go into a fresh sandbox without canaries,
			// never into the episode's own.
			graded := slices.Contains(types, trajectory.TypeGrade)
			copied := len(be.Created()) == 2 && be.Created()[1].CopiedIn() && len(be.Created()[1].Spec().Canaries) == 0
			if graded != (tc.failure != FailureInfrastructure) || graded != copied || be.Created()[0].CopiedIn() {
				t.Errorf("graded %v (hidden tests copied into a fresh sandbox %v, into the episode's %v), want %v",
					graded, copied, be.Created()[0].CopiedIn(), tc.failure != FailureInfrastructure)
			}
		})
	}
}

func TestOpenAICompaction(t *testing.T) {
	one := toolCall("c1", "bash", `{"command":"echo one"}`)
	one.usage = &[3]int{90, 10, 100}
	two := toolCall("c2", "bash", `{"command":"echo two"}`)
	two.usage = &[3]int{330, 20, 350}
	summary := reply{content: "SUMMARY: ran echo one and echo two; nothing left but to submit.", usage: &[3]int{380, 15, 395}}
	submit := toolCall("c3", "submit", `{}`)
	submit.tokenIDs, submit.logprobs = []int64{5, 6}, []float64{-0.5, -0.5}
	llm := newFakeLLM(t, one, two, summary, submit)
	p := newTestOpenAI(t, llm, func(c *OpenAIConfig) { c.ContextBudget = 300 })
	r, st := testRunner(t, &fake.Backend{}, Limits{})
	o, err := r.Run(context.Background(), fakeTask, fakeHidden, EpisodeMeta{}, p)
	if err != nil {
		t.Fatal(err)
	}
	if o.Reason != ReasonSubmit || o.Segments != 2 || !o.Resolved {
		t.Fatalf("outcome: reason %q segments %d resolved %v, want submit 2 true", o.Reason, o.Segments, o.Resolved)
	}
	reqs := llm.requests()
	if _, ok := reqs[2]["tools"]; ok {
		t.Errorf("the summary request offers tools")
	}
	if role, c := lastMessage(t, reqs[2]); role != "user" || !strings.Contains(c, "summary") {
		t.Errorf("summary request ends with %s %q, want the compaction prompt", role, c)
	}
	msgs := reqs[3]["messages"].([]any)
	if len(msgs) != 2 || !strings.Contains(msgs[1].(map[string]any)["content"].(string), "SUMMARY: ran echo one") {
		t.Errorf("the new segment does not start from system + task + summary: %v", msgs)
	}

	evs := events(t, st, o.EpisodeID)
	var comp trajectory.Compaction
	for _, ev := range evs {
		if ev.Type == trajectory.TypeCompaction {
			if err := ev.Decode(&comp); err != nil {
				t.Fatal(err)
			}
			if ev.Segment != 1 {
				t.Errorf("compaction event in segment %d, want 1", ev.Segment)
			}
		}
	}
	if comp.From != 0 || comp.To != 1 || comp.TokensBefore <= 300 || !strings.HasPrefix(comp.Summary, "SUMMARY") {
		t.Errorf("compaction event %+v", comp)
	}
	samples, err := trajectory.Samples(evs)
	if err != nil {
		t.Fatal(err)
	}
	type sampleShape struct {
		Segment  int64
		Roles    []string
		Mask     []int32
		Reward   float64
		Summary  bool
		TokenIDs [][]int64
	}
	var got []sampleShape
	for _, s := range samples {
		sh := sampleShape{Segment: s.Segment, Mask: s.MessageMask, Reward: s.Reward, Summary: s.Summary != "", TokenIDs: s.MessageTokenIDs}
		for _, m := range s.Messages {
			sh.Roles = append(sh.Roles, m.Role)
		}
		got = append(got, sh)
	}
	// The compaction request offers no tools: the model saw another
	// prompt, so it is a chain of its own.
	want := []sampleShape{
		{Segment: 0, Roles: []string{"system", "user", "assistant", "tool", "assistant"},
			Mask: []int32{0, 0, 1, 0, 1}, Reward: 1, TokenIDs: make([][]int64, 5)},
		{Segment: 0, Roles: []string{"system", "user", "assistant", "tool", "assistant", "tool", "user", "assistant"},
			Mask: []int32{0, 0, 0, 0, 0, 0, 0, 1}, Reward: 1, TokenIDs: make([][]int64, 8)},
		{Segment: 1, Roles: []string{"system", "user", "assistant"}, Mask: []int32{0, 0, 1}, Reward: 1, Summary: true,
			TokenIDs: [][]int64{nil, nil, {5, 6}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exported samples (-want +got):\n%s", diff)
	}
}

// modelTurn is the one model turn episode id recorded in st.
func modelTurn(t *testing.T, st *trajectory.Store, id string) trajectory.ModelTurn {
	t.Helper()
	mts := harnesstest.Payloads[trajectory.ModelTurn](t, events(t, st, id), trajectory.TypeModelTurn)
	if len(mts) != 1 {
		t.Fatalf("%d model turns recorded, want 1", len(mts))
	}
	return mts[0]
}
