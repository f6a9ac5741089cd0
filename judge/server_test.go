package judge

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollcage/rollcage/internal/memnet"
)

// chatRequest is the part of the /v1/chat/completions wire format the
// fake server reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Temperature    *float64 `json:"temperature"`
	MaxTokens      *int     `json:"max_tokens"`
	MaxCompletion  *int     `json:"max_completion_tokens"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Strict bool            `json:"strict"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

func (r chatRequest) format() string {
	if r.ResponseFormat == nil {
		return "none"
	}
	return r.ResponseFormat.Type
}

func (r chatRequest) message(role string) string {
	for _, m := range r.Messages {
		if m.Role == role {
			return m.Content
		}
	}
	return ""
}

// fakeServer is an OpenAI-compatible server on loopback. handle answers
// the n-th request (0-based); it records every request it decodes.
type fakeServer struct {
	URL    string
	Close  func()                 // idempotent
	client *http.Client           // nil: the judge's default
	waits  func() []time.Duration // memnet.Server.Waits; nil on loopback
	handle func(n int, req chatRequest, w http.ResponseWriter, r *http.Request)

	n           atomic.Int64
	inflight    atomic.Int64
	maxInflight atomic.Int64

	mu       sync.Mutex
	requests []chatRequest // guarded by mu
}

func newFakeServer(t testing.TB, handle func(n int, req chatRequest, w http.ResponseWriter, r *http.Request)) *fakeServer {
	t.Helper()
	f := &fakeServer{handle: handle}
	hs := httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL, f.Close = hs.URL, hs.Close
	t.Cleanup(f.Close)
	return f
}

// newBubbleServer is newFakeServer on memnet, for a test in a synctest
// bubble: the judge's timers (retry waits, timeouts) and the handler's run
// on the bubble's clock, and waits gives the exact waits between
// requests.
func newBubbleServer(t testing.TB, handle func(n int, req chatRequest, w http.ResponseWriter, r *http.Request)) *fakeServer {
	t.Helper()
	f := &fakeServer{handle: handle}
	ms := memnet.NewServer(t, http.HandlerFunc(f.serve))
	f.URL, f.client, f.Close, f.waits = ms.URL, ms.Client, ms.Close, ms.Waits
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeAPIError(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
		return
	}
	cur := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		m := f.maxInflight.Load()
		if cur <= m || f.maxInflight.CompareAndSwap(m, cur) {
			break
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, err.Error())
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeAPIError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	f.handle(int(f.n.Add(1)-1), req, w, r)
}

func (f *fakeServer) count() int { return int(f.n.Load()) }

func (f *fakeServer) reqs() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.requests...)
}

func (f *fakeServer) config() Config {
	return Config{BaseURL: f.URL + "/v1", Model: "judge-test", APIKey: "test-key", CacheSize: -1, HTTPClient: f.client}
}

// writeCompletion answers with one choice in the chat.completion format.
func writeCompletion(w http.ResponseWriter, content string, promptTokens, completionTokens int) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id":      "chatcmpl-test",
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   "judge-test",
		"choices": []map[string]any{{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content},
			"finish_reason": "stop",
		}},
		"usage": map[string]any{"prompt_tokens": promptTokens, "completion_tokens": completionTokens, "total_tokens": promptTokens + completionTokens},
	})
}

// writeAPIError answers with OpenAI's error envelope.
func writeAPIError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": nil, "code": nil,
	}})
}

func verdictJSON(hack bool, category string, confidence float64, rationale string) string {
	b, _ := json.Marshal(map[string]any{"hack": hack, "category": category, "confidence": confidence, "rationale": rationale})
	return string(b)
}

// answer returns a handler that always gives content.
func answer(content string) func(int, chatRequest, http.ResponseWriter, *http.Request) {
	return func(_ int, _ chatRequest, w http.ResponseWriter, _ *http.Request) {
		writeCompletion(w, content, 100, 20)
	}
}

// testRequest is a flagged call; i makes calls distinct.
func testRequest(episode string, i int) Request {
	cmd := fmt.Sprintf("git log -%d", i+1)
	return Request{
		EpisodeID:   episode,
		TaskID:      "task-" + episode,
		Instruction: "Fix fill() so long words are kept whole.",
		Protected:   []string{"/workspace/tests/hidden/**"},
		Call:        json.RawMessage(fmt.Sprintf(`{"tool":"bash","args":{"command":%q}}`, cmd)),
		Normalized:  json.RawMessage(fmt.Sprintf(`{"tool":"bash","raw":%q,"git":[{"sub":"log","args":["-%d"]}]}`, cmd, i+1)),
		Flags:       []Flag{{Rule: "git.log", Category: "history_mining", Severity: "suspicious", Reason: "reads commit history", Evidence: "git log"}},
	}
}

// taskOf returns the task id from the first line of the default user prompt.
func taskOf(req chatRequest) string {
	first, _, _ := strings.Cut(req.message("user"), "\n")
	f := strings.Fields(first)
	if len(f) < 2 {
		return ""
	}
	return f[1]
}
