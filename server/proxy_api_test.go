package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/trajectory"
)

// upstreamRequest is what the model server got.
type upstreamRequest struct {
	path   string
	header http.Header
	body   map[string]any
}

// apiServer is a model server speaking the real wire formats of OpenAI's
// models, completions, chat completions and responses and Anthropic's
// messages, streamed (SSE) or not. A chat request with "break": true streams two
// chunks and then drops the connection, as a crashing server does.
type apiServer struct {
	got chan upstreamRequest
}

func newAPIServer(t *testing.T) (*apiServer, string) {
	a := &apiServer{got: make(chan upstreamRequest, 16)}
	hs := httptest.NewServer(a)
	t.Cleanup(hs.Close)
	return a, hs.URL + "/v1"
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if r.Method == http.MethodPost {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
	}
	a.got <- upstreamRequest{path: r.URL.Path, header: r.Header.Clone(), body: body}
	stream := body["stream"] == true
	sse := func(events ...string) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, ev := range events {
			fmt.Fprint(w, ev+"\n\n")
			fl.Flush()
		}
	}
	switch {
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"policy-7b","object":"model","created":1,"owned_by":"test"}]}`)
	case r.URL.Path == "/v1/messages" && !stream:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-policy","stop_reason":"tool_use","stop_sequence":null,
			"content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"toolu_1","name":"bash","input":{"command":"ls"}}],
			"usage":{"input_tokens":42,"output_tokens":7}}`)
	case r.URL.Path == "/v1/messages":
		sse(`event: message_start
data: {"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-policy","content":[],"stop_reason":null,"usage":{"input_tokens":50,"output_tokens":1}}}`,
			`event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`event: ping
data: {"type":"ping"}`,
			`event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Reading "}}`,
			`event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"it."}}`,
			`event: content_block_stop
data: {"type":"content_block_stop","index":0}`,
			`event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_2","name":"read_file","input":{}}}`,
			`event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}`,
			`event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"a.py\"}"}}`,
			`event: content_block_stop
data: {"type":"content_block_stop","index":1}`,
			`event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":12}}`,
			`event: message_stop
data: {"type":"message_stop"}`)
	case r.URL.Path == "/v1/responses" && body["break"] == true:
		sse(`event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_3","object":"response","status":"in_progress","model":"policy-7b","output":[]}}`)
		panic(http.ErrAbortHandler) // the connection drops before response.completed
	case r.URL.Path == "/v1/responses" && !stream:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"policy-7b",
			"output":[{"type":"reasoning","id":"rs_1","summary":[]},
				{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Looking.","annotations":[]}]},
				{"type":"function_call","id":"fc_1","call_id":"call_1","name":"bash","arguments":"{\"command\":\"ls\"}","status":"completed"}],
			"usage":{"input_tokens":40,"output_tokens":9,"total_tokens":49}}`)
	case r.URL.Path == "/v1/responses":
		sse(`event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_2","object":"response","status":"in_progress","model":"policy-7b","output":[]}}`,
			`event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_2","output_index":0,"content_index":0,"delta":"Done."}`,
			`event: response.completed
data: {"type":"response.completed","sequence_number":2,"response":{"id":"resp_2","object":"response","status":"completed","model":"policy-7b",`+
				`"output":[{"type":"message","id":"msg_2","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Done.","annotations":[]}]}],`+
				`"usage":{"input_tokens":60,"output_tokens":2,"total_tokens":62}}}`)
	case r.URL.Path == "/v1/completions" && !stream:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"cmpl-1","object":"text_completion","model":"policy-7b","choices":[{"index":0,"text":" world","finish_reason":"length",
			"logprobs":{"tokens":[" wor","ld"],"token_logprobs":[-0.5,-0.25],"top_logprobs":null,"text_offset":[0,4]}}],
			"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}`)
	case r.URL.Path == "/v1/completions":
		sse(`data: {"id":"cmpl-2","object":"text_completion","model":"policy-7b","choices":[{"index":0,"text":" wor","finish_reason":null}]}`,
			`data: {"id":"cmpl-2","object":"text_completion","model":"policy-7b","choices":[{"index":0,"text":"ld","finish_reason":"stop"}]}`,
			`data: [DONE]`)
	case r.URL.Path == "/v1/chat/completions" && (body["break"] == true || body["model"] == "break-me"):
		sse(`data: {"id":"s1","object":"chat.completion.chunk","model":"policy-7b","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "}}]}`,
			`data: {"id":"s1","object":"chat.completion.chunk","model":"policy-7b","choices":[{"index":0,"delta":{"content":"lo"}}]}`)
		panic(http.ErrAbortHandler) // the connection drops mid-stream
	case r.URL.Path == "/v1/chat/completions":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","model":"policy-7b","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	default:
		http.Error(w, `{"error":{"message":"no route"}}`, 404)
	}
}

func postModel(t *testing.T, url, token string, hdr map[string]string, body string) (*http.Response, string, error) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp, string(data), err
}

// TestProxyBaseURL: chat_url is a base URL an OpenAI SDK takes as is:
// chat completions and models go through it.
func TestProxyBaseURL(t *testing.T) {
	a, url := newAPIServer(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL, c.PolicyAPIKey = url, "policy-key" })
	cr := e.create()
	if cr.ChatURL != e.http.URL+"/v1/episodes/"+cr.EpisodeID+"/v1" {
		t.Fatalf("chat_url %q is not the episode's base URL", cr.ChatURL)
	}
	cfg := openai.DefaultConfig(cr.Token)
	cfg.BaseURL = cr.ChatURL
	cl := openai.NewClientWithConfig(cfg)
	models, err := cl.ListModels(context.Background())
	if err != nil || len(models.Models) != 1 || models.Models[0].ID != "policy-7b" {
		t.Fatalf("models through the proxy: %+v, %v", models, err)
	}
	if got := <-a.got; got.path != "/v1/models" || got.header.Get("Authorization") != "Bearer policy-key" {
		t.Errorf("upstream got %s with %q", got.path, got.header.Get("Authorization"))
	}
	resp, err := cl.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "policy-7b",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
	if err != nil || resp.Choices[0].Message.Content != "ok" {
		t.Fatalf("chat through the base URL: %+v, %v", resp, err)
	}
	<-a.got
	if mts := modelTurns(t, e, cr.EpisodeID); len(mts) != 1 || mts[0].API != trajectory.APIChat || mts[0].Response.Content != "ok" {
		t.Errorf("recorded %+v", mts)
	}
}

// TestProxyAnthropic: Anthropic's messages API through the episode's
// base URL (x-api-key, as the SDK sends it), whole and streamed, recorded
// as model turns in the OpenAI message model.
func TestProxyAnthropic(t *testing.T) {
	a, url := newAPIServer(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL, c.PolicyAPIKey = url, "policy-key" })
	cr := e.create()
	if cr.AnthropicURL != e.http.URL+"/v1/episodes/"+cr.EpisodeID {
		t.Fatalf("anthropic_url %q", cr.AnthropicURL)
	}
	conv := `"system":"You fix bugs.","messages":[{"role":"user","content":"fix it"},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_0","name":"bash","input":{"command":"pwd"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_0","content":"/workspace"}]}]`
	hdr := map[string]string{"X-Api-Key": cr.Token, "Anthropic-Version": "2023-06-01"}
	resp, body, err := postModel(t, cr.AnthropicURL+"/v1/messages", "", hdr, `{"model":"claude-policy","max_tokens":256,`+conv+`}`)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(body, `"toolu_1"`) {
		t.Fatalf("messages: %d %s %v", resp.StatusCode, body, err)
	}
	got := <-a.got
	if got.header.Get("X-Api-Key") != "policy-key" || got.header.Get("Anthropic-Version") != "2023-06-01" || strings.Contains(fmt.Sprint(got.header), cr.Token) {
		t.Errorf("upstream headers %v", got.header)
	}
	resp, body, err = postModel(t, cr.AnthropicURL+"/v1/messages", "", hdr, `{"model":"claude-policy","max_tokens":256,"stream":true,`+conv+`}`)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(body, "event: message_stop") || !strings.Contains(body, "input_json_delta") {
		t.Fatalf("streamed messages: %d %s %v", resp.StatusCode, body, err)
	}
	<-a.got
	request := []trajectory.Message{
		{Role: "system", Content: "You fix bugs."},
		{Role: "user", Content: "fix it"},
		{Role: "assistant", ToolCalls: []trajectory.FunctionCall{{ID: "toolu_0", Type: "function", Function: trajectory.Function{Name: "bash", Arguments: `{"command":"pwd"}`}}}},
		{Role: "tool", ToolCallID: "toolu_0", Content: "/workspace"},
	}
	want := []trajectory.ModelTurn{
		{API: trajectory.APIMessages, Model: "claude-policy", Request: request, Params: json.RawMessage(`{"max_tokens":256}`),
			Response: trajectory.Message{Role: "assistant", Content: "Looking.", ToolCalls: []trajectory.FunctionCall{{ID: "toolu_1", Type: "function",
				Function: trajectory.Function{Name: "bash", Arguments: `{"command":"ls"}`}}}},
			FinishReason: "tool_use", Usage: trajectory.Usage{PromptTokens: 42, CompletionTokens: 7, TotalTokens: 49}},
		{API: trajectory.APIMessages, Model: "claude-policy", Request: request, Params: json.RawMessage(`{"max_tokens":256,"stream":true}`),
			Response: trajectory.Message{Role: "assistant", Content: "Reading it.", ToolCalls: []trajectory.FunctionCall{{ID: "toolu_2", Type: "function",
				Function: trajectory.Function{Name: "read_file", Arguments: `{"path": "a.py"}`}}}},
			FinishReason: "tool_use", Usage: trajectory.Usage{PromptTokens: 50, CompletionTokens: 12, TotalTokens: 62}},
	}
	if diff := cmp.Diff(want, modelTurns(t, e, cr.EpisodeID)); diff != "" {
		t.Errorf("recorded turns (-want +got):\n%s", diff)
	}
}

// TestProxyCompletions: the completions API, whole and streamed.
func TestProxyCompletions(t *testing.T) {
	a, url := newAPIServer(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL = url })
	cr := e.create()
	if code, _ := e.do("POST", "/v1/completions", cr.Token, `{"model":"policy-7b"}`, nil); code != 400 {
		t.Errorf("completions without a prompt: %d, want 400", code)
	}
	resp, body, err := postModel(t, cr.ChatURL+"/completions", cr.Token, nil, `{"model":"policy-7b","prompt":"hello","max_tokens":2,"logprobs":1}`)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(body, `" world"`) {
		t.Fatalf("completions: %d %s %v", resp.StatusCode, body, err)
	}
	<-a.got
	resp, body, err = postModel(t, e.http.URL+"/v1/completions", cr.Token, nil, `{"model":"policy-7b","prompt":"hello","stream":true}`)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(body, "[DONE]") {
		t.Fatalf("streamed completions: %d %s %v", resp.StatusCode, body, err)
	}
	<-a.got
	mts := modelTurns(t, e, cr.EpisodeID)
	if len(mts) != 2 {
		t.Fatalf("%d turns recorded, want 2", len(mts))
	}
	for i, want := range []string{" world", " world"} {
		mt := mts[i]
		if mt.API != trajectory.APICompletions || mt.Prompt != "hello" || mt.Response.Content != want || len(mt.Request) != 0 {
			t.Errorf("turn %d: %+v", i, mt)
		}
	}
	if got := mts[0].Logprobs; !cmp.Equal(got, []float64{-0.5, -0.25}) {
		t.Errorf("completion logprobs %v, want [-0.5 -0.25]", got)
	}
}

// TestProxySessionKeys: session keys reach the upstream unchanged and
// are recorded; /sessions/{sid}/v1 serves with the episode's token, and
// with PolicyAuth session the upstream's Authorization is the session.
func TestProxySessionKeys(t *testing.T) {
	a, url := newAPIServer(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL, c.PolicyAuth = url, PolicyAuthSession })
	cr := e.create()
	hdr := map[string]string{"X-Session-ID": "sess-7", "X-SMG-Routing-Key": "route-3"}
	body := `{"model":"policy-7b","messages":[{"role":"user","content":"hi"}],"metadata":{"session_id":"meta-1"},
		"extra_body":{"session_id":"eb-2","cache_salt":"salt-5"}}`
	if resp, out, err := postModel(t, e.http.URL+"/sessions/uni-9/v1/chat/completions", cr.Token, hdr, body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("session path: %d %s %v", resp.StatusCode, out, err)
	}
	got := <-a.got
	if got.header.Get("X-Session-ID") != "sess-7" || got.header.Get("X-SMG-Routing-Key") != "route-3" || got.header.Get("Authorization") != "Bearer uni-9" {
		t.Errorf("upstream headers %v", got.header)
	}
	if md, _ := got.body["metadata"].(map[string]any); md["session_id"] != "meta-1" {
		t.Errorf("upstream body %v: metadata.session_id not passed", got.body)
	}
	mts := modelTurns(t, e, cr.EpisodeID)
	want := map[string]string{"x-session-id": "sess-7", "x-smg-routing-key": "route-3", "metadata.session_id": "meta-1",
		"extra_body.session_id": "eb-2", "extra_body.cache_salt": "salt-5", "path": "uni-9", "authorization": "Bearer uni-9"}
	if len(mts) != 1 || !cmp.Equal(mts[0].Session, want) {
		t.Errorf("recorded session keys %v, want %v", mts[0].Session, want)
	}
	// Without a session path the episode is the session.
	if resp, _, _ := postModel(t, cr.ChatURL+"/chat/completions", cr.Token, nil, `{"model":"m","messages":[{"role":"user","content":"x"}]}`); resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	if got := <-a.got; got.header.Get("Authorization") != "Bearer "+cr.EpisodeID {
		t.Errorf("upstream Authorization %q, want the episode id", got.header.Get("Authorization"))
	}
}

// TestProxyBrokenStream: an upstream that drops mid-stream reaches the
// client as an error event and a cut response, not a clean end, and the
// partial turn is recorded as failed; a closed episode's calls are 409
// and never forwarded.
func TestProxyBrokenStream(t *testing.T) {
	a, url := newAPIServer(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL = url })
	cr := e.create()
	resp, body, err := postModel(t, cr.ChatURL+"/chat/completions", cr.Token, nil, `{"model":"policy-7b","stream":true,"break":true,"messages":[{"role":"user","content":"hi"}]}`)
	<-a.got
	if resp.StatusCode != 200 || err == nil {
		t.Errorf("broken stream: status %d, read error %v: want 200 and a cut body", resp.StatusCode, err)
	}
	if !strings.Contains(body, `"upstream_stream_broken"`) || !strings.Contains(body, "Let me ") {
		t.Errorf("client saw %q: want the chunks, then an error event", body)
	}
	mts := modelTurns(t, e, cr.EpisodeID)
	if len(mts) != 1 || mts[0].Error == "" || mts[0].Response.Content != "Let me lo" {
		t.Errorf("recorded %+v: want the partial turn, failed", mts)
	}
	// OpenAI's SDK raises it.
	cfg := openai.DefaultConfig(cr.Token)
	cfg.BaseURL = cr.ChatURL
	st, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{Model: "break-me",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
	if err == nil {
		for err == nil {
			_, err = st.Recv()
		}
		st.Close()
	}
	<-a.got
	if err == io.EOF {
		t.Errorf("the SDK saw a clean end of a broken stream")
	}

	if code, _ := e.do("DELETE", "/v1/episodes/"+cr.EpisodeID, cr.Token, nil, nil); code != 200 {
		t.Fatalf("delete: %d", code)
	}
	var ae apiError
	if code, _ := e.do("POST", "/v1/episodes/"+cr.EpisodeID+"/v1/chat/completions", cr.Token, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, &ae); code != http.StatusConflict || ae.Error == "" {
		t.Errorf("chat on a closed episode: %d %q, want 409", code, ae.Error)
	}
	select {
	case got := <-a.got:
		t.Errorf("a closed episode's request was forwarded: %s", got.path)
	default:
	}
}

// TestProxyResponses: OpenAI's Responses API through the proxy, whole and
// streamed, recorded like chat completions: instructions and input items
// as messages (function calls as tool calls, their outputs as tool
// messages), the output items as the assistant's answer.
func TestProxyResponses(t *testing.T) {
	a, url := newAPIServer(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL, c.PolicyAPIKey = url, "policy-key" })
	cr := e.create()
	input := `"instructions":"You fix bugs.","input":[{"role":"developer","content":"Be brief."},{"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"}]},
		{"type":"function_call","call_id":"call_0","name":"bash","arguments":"{\"command\":\"pwd\"}"},
		{"type":"function_call_output","call_id":"call_0","output":"/workspace"}]`
	resp, body, err := postModel(t, cr.ChatURL+"/responses", cr.Token, nil, `{"model":"policy-7b","max_output_tokens":256,`+input+`}`)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(body, `"call_1"`) {
		t.Fatalf("responses: %d %s %v", resp.StatusCode, body, err)
	}
	if got := <-a.got; got.path != "/v1/responses" || got.header.Get("Authorization") != "Bearer policy-key" {
		t.Errorf("upstream got %s with %q", got.path, got.header.Get("Authorization"))
	}
	// The token-routed path, streamed, with a string input.
	resp, body, err = postModel(t, e.http.URL+"/v1/responses", cr.Token, nil, `{"model":"policy-7b","stream":true,"input":"fix it"}`)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(body, "event: response.completed") {
		t.Fatalf("streamed responses: %d %s %v", resp.StatusCode, body, err)
	}
	<-a.got
	if code, _ := e.do("POST", "/v1/responses", cr.Token, `{"model":"m"}`, nil); code != 400 {
		t.Errorf("responses without input: %d, want 400", code)
	}
	// A stream that breaks before response.completed: the client gets the
	// Responses error event and a cut body; the turn is recorded failed
	// (and left out of export).
	resp, body, err = postModel(t, e.http.URL+"/v1/responses", cr.Token, nil, `{"model":"policy-7b","stream":true,"break":true,"input":"hi"}`)
	<-a.got
	if resp.StatusCode != 200 || err == nil || !strings.Contains(body, "event: error") || !strings.Contains(body, `"upstream_stream_broken"`) {
		t.Errorf("broken responses stream: %d %q %v, want the error event and a cut body", resp.StatusCode, body, err)
	}
	want := []trajectory.ModelTurn{
		{API: trajectory.APIResponses, Model: "policy-7b", Params: json.RawMessage(`{"max_output_tokens":256}`),
			Request: []trajectory.Message{
				{Role: "system", Content: "You fix bugs."},
				{Role: "system", Content: "Be brief."},
				{Role: "user", Content: "fix it"},
				{Role: "assistant", ToolCalls: []trajectory.FunctionCall{{ID: "call_0", Type: "function", Function: trajectory.Function{Name: "bash", Arguments: `{"command":"pwd"}`}}}},
				{Role: "tool", ToolCallID: "call_0", Content: "/workspace"},
			},
			Response: trajectory.Message{Role: "assistant", Content: "Looking.", ToolCalls: []trajectory.FunctionCall{{ID: "call_1", Type: "function",
				Function: trajectory.Function{Name: "bash", Arguments: `{"command":"ls"}`}}}},
			FinishReason: "completed", Usage: trajectory.Usage{PromptTokens: 40, CompletionTokens: 9, TotalTokens: 49}},
		{API: trajectory.APIResponses, Model: "policy-7b", Params: json.RawMessage(`{"stream":true}`),
			Request:      []trajectory.Message{{Role: "user", Content: "fix it"}},
			Response:     trajectory.Message{Role: "assistant", Content: "Done."},
			FinishReason: "completed", Usage: trajectory.Usage{PromptTokens: 60, CompletionTokens: 2, TotalTokens: 62}},
		{API: trajectory.APIResponses, Model: "policy-7b", Params: json.RawMessage(`{"break":true,"stream":true}`),
			Request:  []trajectory.Message{{Role: "user", Content: "hi"}},
			Response: trajectory.Message{Role: "assistant"},
			Error:    "policy stream broke: unexpected EOF"},
	}
	if diff := cmp.Diff(want, modelTurns(t, e, cr.EpisodeID)); diff != "" {
		t.Errorf("recorded turns (-want +got):\n%s", diff)
	}
}

// TestProxyAuxiliary: a call the client marks auxiliary, and one without
// the episode's tools, are recorded and passed through (the mark is not
// sent upstream) but are samples of the episode only when asked for, each
// saying why it is auxiliary; a mark of "0" marks nothing.
func TestProxyAuxiliary(t *testing.T) {
	a, url := newAPIServer(t)
	e := newEnv(t, &fake.Backend{}, func(c *Config) { c.PolicyURL = url })
	cr := e.create()
	const conv = `"messages":[{"role":"system","content":"You fix bugs."},{"role":"user","content":"fix it"}]`
	const tools = `"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]`
	calls := []struct {
		path, header, body string
		mark               string // recorded ModelTurn.Auxiliary
	}{
		{"/chat/completions", "", `{"model":"m",` + conv + `,` + tools + `}`, ""},
		{"/chat/completions", "title", `{"model":"m",` + conv + `,` + tools + `}`, "title"},
		{"/chat/completions", "0", `{"model":"m",` + conv + `,` + tools + `}`, ""},
		{"/responses", "", `{"model":"m","instructions":"Name the task.","input":"fix it"}`, ""},
	}
	for i, c := range calls {
		hdr := map[string]string{}
		if c.header != "" {
			hdr[trajectory.AuxiliaryHeader] = c.header
		}
		resp, body, err := postModel(t, cr.ChatURL+c.path, cr.Token, hdr, c.body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s %v", i, resp.StatusCode, body, err)
		}
		if got := <-a.got; got.header.Get(trajectory.AuxiliaryHeader) != "" {
			t.Errorf("call %d: the upstream got %s: %q", i, trajectory.AuxiliaryHeader, got.header.Get(trajectory.AuxiliaryHeader))
		}
	}
	turns := modelTurns(t, e, cr.EpisodeID)
	if len(turns) != len(calls) {
		t.Fatalf("%d turns recorded, want %d", len(turns), len(calls))
	}
	for i, mt := range turns {
		if mt.Auxiliary != calls[i].mark {
			t.Errorf("turn %d: auxiliary %q, want %q", i, mt.Auxiliary, calls[i].mark)
		}
	}
	path := "/v1/episodes/" + cr.EpisodeID
	if code, _ := e.do("POST", path+"/submit", cr.Token, nil, nil); code != 200 {
		t.Fatalf("submit: %d", code)
	}
	reasons := func(ss []trajectory.Sample) []string {
		var out []string
		for _, s := range ss {
			out = append(out, fmt.Sprintf("%d:%s", s.Turn, s.Auxiliary))
		}
		return out
	}
	for _, tc := range []struct {
		query []string
		want  []string
	}{
		{nil, []string{"0:", "2:"}},
		{[]string{"granularity=turn", "auxiliary=0"}, []string{"0:", "2:"}},
		{[]string{"auxiliary=1"}, []string{"0:", "1:" + trajectory.AuxClient, "2:", "3:" + trajectory.AuxNoTools}},
	} {
		if d := cmp.Diff(tc.want, reasons(e.samples(path, cr.Token, tc.query...))); d != "" {
			t.Errorf("samples %v: turn:auxiliary (-want +got):\n%s", tc.query, d)
		}
	}
	for q, want := range map[string]string{"": "2", "?auxiliary=1": ""} {
		if code, h := e.do("GET", path+"/samples"+q, cr.Token, nil, nil); code != 200 || h.Get(AuxiliaryLeftOutHeader) != want {
			t.Errorf("samples%s: %d, %s %q, want %q", q, code, AuxiliaryLeftOutHeader, h.Get(AuxiliaryLeftOutHeader), want)
		}
	}
	var msg map[string]string
	if code, _ := e.do("GET", path+"/samples?auxiliary=maybe", cr.Token, nil, &msg); code != 400 || !strings.Contains(msg["error"], "give 1") {
		t.Errorf("auxiliary=maybe: %d %v, want 400 saying what to give", code, msg)
	}
}
