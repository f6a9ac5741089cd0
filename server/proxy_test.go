package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/trajectory"
)

// policyServer is an OpenAI-compatible chat-completions server speaking
// the real wire format, vLLM extensions included: like vLLM it returns
// token ids only when asked (return_token_ids) and logprobs only when
// asked (logprobs); with strict set it refuses fields it does not know,
// as OpenAI's API does. A streamed answer waits on next between its
// chunks, so the test can prove that chunks reach the client as they
// come.
type policyServer struct {
	t        *testing.T
	next     chan struct{}
	requests chan map[string]any
	auth     chan string
	strict   bool
}

// served drops from a chunk or body (a JSON object) what the request did
// not ask for.
func served(req map[string]any, body string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		panic(err)
	}
	chs, _ := m["choices"].([]any)
	for _, c := range chs {
		ch := c.(map[string]any)
		if req["return_token_ids"] != true {
			delete(ch, "token_ids")
		}
		if req["logprobs"] != true {
			delete(ch, "logprobs")
		}
	}
	if req["return_token_ids"] != true {
		delete(m, "prompt_token_ids")
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func (p *policyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "no route "+r.URL.Path, 404)
		return
	}
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	p.requests <- req
	p.auth <- r.Header.Get("Authorization")
	if _, ok := req["return_token_ids"]; ok && p.strict {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"Unrecognized request argument supplied: return_token_ids","type":"invalid_request_error","param":null,"code":null}}`)
		return
	}
	if req["stream"] != true {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, served(req, `{"id":"c1","object":"chat.completion","model":"policy-7b","prompt_token_ids":[1,2,3],"choices":[{"index":0,
			"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},
			"finish_reason":"tool_calls","token_ids":[11,12,13],
			"logprobs":{"content":[{"token":"a","logprob":-0.5,"bytes":null,"top_logprobs":[{"token":"a","logprob":-0.5},{"token":"z","logprob":-2}]},{"token":"b","logprob":-0.25,"bytes":null,"top_logprobs":[]},{"token":"c","logprob":-0.125,"bytes":null,"top_logprobs":[]}]}}],
			"usage":{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23}}`))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	chunks := []string{
		`{"id":"s1","object":"chat.completion.chunk","model":"policy-7b","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "},"logprobs":{"content":[{"token":"token_id:101","logprob":-0.1}]}}]}`,
		`{"id":"s1","object":"chat.completion.chunk","model":"policy-7b","choices":[{"index":0,"delta":{"content":"look."},"logprobs":{"content":[{"token":"token_id:102","logprob":-0.2}]}}]}`,
		`{"id":"s1","object":"chat.completion.chunk","model":"policy-7b","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"read_file","arguments":"{\"path\":"}}]},"logprobs":{"content":[{"token":"token_id:103","logprob":-0.3}]}}]}`,
		`{"id":"s1","object":"chat.completion.chunk","model":"policy-7b","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.py\"}"}}]},"finish_reason":"tool_calls","logprobs":{"content":[{"token":"token_id:104","logprob":-0.4}]}}]}`,
		`{"id":"s1","object":"chat.completion.chunk","model":"policy-7b","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":4,"total_tokens":34}}`,
	}
	for i, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", served(req, c))
		fl.Flush()
		if i == 0 {
			<-p.next
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func newPolicy(t *testing.T) (*policyServer, string) {
	p := &policyServer{t: t, next: make(chan struct{}), requests: make(chan map[string]any, 4), auth: make(chan string, 4)}
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	return p, hs.URL + "/v1"
}

func modelTurns(t *testing.T, e *env, id string) []trajectory.ModelTurn {
	t.Helper()
	out := harnesstest.Payloads[trajectory.ModelTurn](t, e.events(id), trajectory.TypeModelTurn)
	for i := range out {
		out[i].LatencyMS = 0
	}
	return out
}

func TestProxyNonStreaming(t *testing.T) {
	p, url := newPolicy(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL, c.PolicyAPIKey = url, "policy-key" })
	cr := e.create()
	// The trainer's own OpenAI client, pointed at the gateway with the
	// episode token, through the token-routed path.
	cfg := openai.DefaultConfig(cr.Token)
	cfg.BaseURL = e.http.URL + "/v1"
	client := openai.NewClientWithConfig(cfg)
	resp, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "policy-7b", LogProbs: true,
		Messages: []openai.ChatCompletionMessage{{Role: "system", Content: "be good"}, {Role: "user", Content: "fix it"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.ToolCalls[0].Function.Name != "bash" {
		t.Fatalf("response: %+v", resp)
	}
	if got := <-p.auth; got != "Bearer policy-key" {
		t.Errorf("policy server saw Authorization %q, want the policy key (never the episode token)", got)
	}
	if req := <-p.requests; req["logprobs"] != true {
		t.Errorf("request not forwarded unchanged: %v", req)
	}
	want := []trajectory.ModelTurn{{API: trajectory.APIChat,
		Model:   "policy-7b",
		Request: []trajectory.Message{{Role: "system", Content: "be good"}, {Role: "user", Content: "fix it"}},
		Response: trajectory.Message{Role: "assistant", ToolCalls: []trajectory.FunctionCall{{ID: "call_1", Type: "function",
			Function: trajectory.Function{Name: "bash", Arguments: `{"command":"ls"}`}}}},
		// The proxy asked for token ids (by default).
		Params:         json.RawMessage(`{"logprobs":true,"return_token_ids":true,"stream":false}`),
		PromptTokenIDs: []int64{1, 2, 3},
		TokenIDs:       []int64{11, 12, 13}, Logprobs: []float64{-0.5, -0.25, -0.125}, Tokens: []string{"a", "b", "c"},
		TopLogprobs:  [][]trajectory.TopLogprob{{{Token: "a", Logprob: -0.5}, {Token: "z", Logprob: -2}}, {}, {}},
		FinishReason: "tool_calls",
		Usage:        trajectory.Usage{PromptTokens: 20, CompletionTokens: 3, TotalTokens: 23},
	}}
	if diff := cmp.Diff(want, modelTurns(t, e, cr.EpisodeID)); diff != "" {
		t.Errorf("recorded turns (-want +got):\n%s", diff)
	}
}

// TestProxyAsksForTokens: with TokenIDs vllm the proxy adds
// return_token_ids and logprobs to a request that does not set them (never
// overriding a field the client set), and records the tools list and
// parameters as forwarded.
func TestProxyAsksForTokens(t *testing.T) {
	p, url := newPolicy(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL, c.TokenIDs = url, trajectory.TokensVLLM })
	cr := e.create()
	tools := `[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]`
	body := `{"model":"policy-7b","temperature":0.25,"return_token_ids":false,"tools":` + tools + `,"messages":[{"role":"user","content":"fix it"}]}`
	req, _ := http.NewRequest("POST", cr.ChatURL+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cr.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	<-p.auth
	fwd := <-p.requests
	if fwd["logprobs"] != true || fwd["return_token_ids"] != false || fwd["temperature"] != 0.25 {
		t.Errorf("forwarded %v: want logprobs added, the client's return_token_ids and temperature kept", fwd)
	}
	turns := modelTurns(t, e, cr.EpisodeID)
	if len(turns) != 1 {
		t.Fatalf("%d turns recorded, want 1", len(turns))
	}
	if string(turns[0].Tools) != tools || string(turns[0].Params) != `{"logprobs":true,"return_token_ids":false,"temperature":0.25}` {
		t.Errorf("recorded tools %s params %s", turns[0].Tools, turns[0].Params)
	}
	if bad := (Config{TokenIDs: "tgi"}).Validate(); bad == nil || !strings.Contains(bad.Error(), "use vllm, sglang or off") {
		t.Errorf("Config with TokenIDs tgi: %v, want an error naming the modes", bad)
	}
}

func TestProxyStreaming(t *testing.T) {
	p, url := newPolicy(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL = url })
	cr := e.create()
	body := `{"model":"policy-7b","stream":true,"stream_options":{"include_usage":true},"logprobs":true,
		"messages":[{"role":"user","content":[{"type":"text","text":"fix "},{"type":"text","text":"it"}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c0","type":"function","function":{"name":"bash","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c0","content":"ok"}]}`
	// The path before chat_url became a base URL still serves.
	req, _ := http.NewRequest("POST", e.http.URL+"/v1/episodes/"+cr.EpisodeID+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cr.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	// The first chunk arrives while the policy server still holds the rest.
	first, err := br.ReadString('\n')
	if err != nil || !strings.Contains(first, `"content":"Let me "`) {
		t.Fatalf("first chunk: %q %v", first, err)
	}
	close(p.next)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") || strings.Count(string(rest), "data: ") != 5 {
		t.Errorf("rest of the stream: %q", rest)
	}
	<-p.auth
	want := []trajectory.ModelTurn{{API: trajectory.APIChat,
		Model: "policy-7b",
		// The content's two text parts are joined by a newline, as vLLM
		// joins them for the model (trajectory.ContentText).
		Request: []trajectory.Message{{Role: "user", Content: "fix \nit"},
			{Role: "assistant", ToolCalls: []trajectory.FunctionCall{{ID: "c0", Type: "function", Function: trajectory.Function{Name: "bash", Arguments: "{}"}}}},
			{Role: "tool", ToolCallID: "c0", Content: "ok"}},
		Response: trajectory.Message{Role: "assistant", Content: "Let me look.", ToolCalls: []trajectory.FunctionCall{{ID: "call_9", Type: "function",
			Function: trajectory.Function{Name: "read_file", Arguments: `{"path":"a.py"}`}}}},
		Params:   json.RawMessage(`{"logprobs":true,"return_token_ids":true,"stream":true,"stream_options":{"include_usage":true}}`),
		TokenIDs: []int64{101, 102, 103, 104}, Logprobs: []float64{-0.1, -0.2, -0.3, -0.4},
		Tokens:       []string{"token_id:101", "token_id:102", "token_id:103", "token_id:104"},
		FinishReason: "tool_calls",
		Usage:        trajectory.Usage{PromptTokens: 30, CompletionTokens: 4, TotalTokens: 34},
	}}
	if diff := cmp.Diff(want, modelTurns(t, e, cr.EpisodeID)); diff != "" {
		t.Errorf("recorded turns (-want +got):\n%s", diff)
	}
}

func TestProxyErrors(t *testing.T) {
	_, url := newPolicy(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL, c.MaxChatBytes = url, 256 })
	cr := e.create()
	tests := []struct {
		name, path, token, body string
		want                    int
		msg                     string
	}{
		{"admin on token route", "/v1/chat/completions", testAdmin, `{"messages":[{"role":"user","content":"x"}]}`, 400, "names no episode"},
		{"no messages", "/v1/chat/completions", cr.Token, `{"model":"m"}`, 400, `field "messages"`},
		{"bad json", "/v1/chat/completions", cr.Token, `{"model":`, 400, "malformed JSON"},
		{"wrong type", "/v1/chat/completions", cr.Token, `{"messages":"hi"}`, 400, `field "messages": must be an array`},
		{"oversized", "/v1/chat/completions", cr.Token, `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 300) + `"}]}`, 413, "compact the conversation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ae apiError
			code, _ := e.do("POST", tc.path, tc.token, tc.body, &ae)
			if code != tc.want || !strings.Contains(ae.Error, tc.msg) {
				t.Errorf("got %d %q, want %d with %q", code, ae.Error, tc.want, tc.msg)
			}
		})
	}
	if n := len(modelTurns(t, e, cr.EpisodeID)); n != 0 {
		t.Errorf("%d turns recorded from bad requests", n)
	}
	// No policy server configured.
	e2 := newEnv(t, &fake.Backend{}, nil)
	cr2 := e2.create()
	var ae apiError
	if code, _ := e2.do("POST", "/v1/chat/completions", cr2.Token, `{"messages":[{"role":"user","content":"x"}]}`, &ae); code != 503 || !strings.Contains(ae.Error, "--policy-url") {
		t.Errorf("no policy: %d %q", code, ae.Error)
	}
}

// TestProxyTokenIDs: by default the proxy asks for token ids with vLLM's
// fields, so a server that returns ids only when asked gives token-exact
// samples; a server that refuses the fields (a 400 naming them) is asked
// once more as the client asked, the episode's later turns go as sent,
// and its samples say tokens "unavailable"; off asks for nothing.
func TestProxyTokenIDs(t *testing.T) {
	tests := []struct {
		name     string
		mode     string
		strict   bool
		requests int    // reaching the model server for two turns
		asked    []bool // return_token_ids in each request
		tokens   string // the samples' tokens state
		why      string // in each turn's TokensUnavailable
	}{
		{"default asks", "", false, 2, []bool{true, true}, trajectory.TokenIDsPresent, ""},
		{"vllm asks", trajectory.TokensVLLM, false, 2, []bool{true, true}, trajectory.TokenIDsPresent, ""},
		{"off asks nothing", trajectory.TokensOff, false, 2, []bool{false, false}, trajectory.TokenIDsAbsent, ""},
		{"refused: retried once without", "", true, 3, []bool{true, false, false}, trajectory.TokenIDsUnavailable,
			"the model server refused logprobs, return_token_ids (400: Unrecognized request argument supplied: return_token_ids)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, url := newPolicy(t)
			p.strict = tc.strict
			e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL, c.TokenIDs = url, tc.mode })
			cr := e.create()
			path := "/v1/episodes/" + cr.EpisodeID
			conv := `[{"role":"user","content":"fix it"}]`
			for turn := range 2 {
				if turn == 1 {
					conv = `[{"role":"user","content":"fix it"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"a.py"}]`
				}
				var out map[string]any
				if code, _ := e.do("POST", path+"/chat/completions", cr.Token, `{"model":"m","messages":`+conv+`}`, &out); code != 200 {
					t.Fatalf("turn %d: %d %v", turn, code, out)
				}
			}
			var asked []bool
			for i := range tc.requests {
				select {
				case req := <-p.requests:
					<-p.auth
					_, ok := req["return_token_ids"]
					asked = append(asked, ok)
				case <-time.After(10 * time.Second):
					t.Fatalf("%d requests reached the model server, want %d", i, tc.requests)
				}
			}
			if len(p.requests) != 0 {
				t.Errorf("%d more requests reached the model server than the %d expected", len(p.requests), tc.requests)
			}
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("return_token_ids in the requests: %v, want %v", asked, tc.asked)
			}
			for i, mt := range modelTurns(t, e, cr.EpisodeID) {
				if mt.TokensUnavailable != tc.why {
					t.Errorf("turn %d: tokens_unavailable %q, want %q", i, mt.TokensUnavailable, tc.why)
				}
			}
			if code, _ := e.do("POST", path+"/submit", cr.Token, nil, nil); code != 200 {
				t.Fatalf("submit: %d", code)
			}
			for _, s := range e.samples(path, cr.Token) {
				if s.Tokens != tc.tokens {
					t.Errorf("sample %s: tokens %q, want %q", s.SampleID, s.Tokens, tc.tokens)
				}
			}
		})
	}
}

// samples gets an ended episode's samples from the gateway; query, when
// given, is the export's query string.
func (e *env) samples(path, token string, query ...string) []trajectory.Sample {
	e.t.Helper()
	q := ""
	if len(query) > 0 {
		q = "?" + strings.Join(query, "&")
	}
	req, _ := http.NewRequest("GET", e.http.URL+path+"/samples"+q, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("samples: %d %s", resp.StatusCode, b)
	}
	var got []trajectory.Sample
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var s trajectory.Sample
		if err := dec.Decode(&s); err != nil {
			e.t.Fatal(err)
		}
		got = append(got, s)
	}
	if len(got) == 0 {
		e.t.Fatal("no samples")
	}
	return got
}
