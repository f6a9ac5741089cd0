package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/rollcage/rollcage/trajectory"
)

// The recording proxy forwards a model request (chat completions,
// completions, Anthropic messages, OpenAI responses) to the policy
// server unchanged and answers with the server's response unchanged
// (streamed chunk by chunk when the request streams), and records the
// request's messages, tools list and sampling parameters and the response
// (reassembled from the chunks), with prompt and completion token ids,
// logprobs, token strings and alternatives when the server returned them
// (trajectory.Served), as a model turn of the episode. To chat and
// completions requests it first adds the fields that ask the server for
// them (Config.TokenIDs; vLLM's by default), and asks once more without
// them when the server refuses them.

// The proxy's paths. An episode's base URL for OpenAI SDKs is
// /v1/episodes/{id}/v1 (chat_url), for Anthropic SDKs /v1/episodes/{id}
// (they add /v1/messages); with an episode's token the gateway's own /v1
// serves too, and /sessions/{sid}/v1 where sid is a session key the
// router upstream pins by.
func (s *Server) proxyRoutes(m *http.ServeMux) {
	for _, api := range []*modelAPI{chatAPI, completionsAPI, messagesAPI, responsesAPI} {
		m.HandleFunc("POST /v1/episodes/{id}/v1"+api.path, s.withAuth(false, false, s.episodeModel(api)))
		m.HandleFunc("POST /v1"+api.path, s.withAuth(false, false, s.tokenModel(api)))
		m.HandleFunc("POST /sessions/{sid}/v1"+api.path, s.withAuth(false, false, s.tokenModel(api)))
	}
	// The path before base URLs.
	m.HandleFunc("POST /v1/episodes/{id}/chat/completions", s.withAuth(false, false, s.episodeModel(chatAPI)))
	m.HandleFunc("GET /v1/episodes/{id}/v1/models", s.withAuth(false, false, func(w http.ResponseWriter, r *http.Request, c caller) {
		if _, ok := s.episodeFor(w, r, c); ok {
			s.proxyModels(w, r)
		}
	}))
	for _, p := range []string{"GET /v1/models", "GET /sessions/{sid}/v1/models"} {
		m.HandleFunc(p, s.withAuth(false, false, func(w http.ResponseWriter, r *http.Request, c caller) { s.proxyModels(w, r) }))
	}
}

func (s *Server) episodeModel(api *modelAPI) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c caller) {
		se, ok := s.episodeFor(w, r, c)
		if !ok {
			return
		}
		s.proxyModel(w, r, se, api)
	}
}

func (s *Server) tokenModel(api *modelAPI) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c caller) {
		if c.se == nil {
			writeError(w, http.StatusBadRequest, "the admin token names no episode: use the episode's token here, or /v1/episodes/{id}/v1"+api.path)
			return
		}
		c.se.touch(time.Now())
		s.proxyModel(w, r, c.se, api)
	}
}

// proxyModels passes GET /models through to the policy server.
func (s *Server) proxyModels(w http.ResponseWriter, r *http.Request) {
	if s.cfg.PolicyURL == "" {
		writeError(w, http.StatusServiceUnavailable, "no policy server configured: start the gateway with --policy-url http://HOST:PORT/v1")
		return
	}
	up, err := http.NewRequestWithContext(r.Context(), http.MethodGet, strings.TrimRight(s.cfg.PolicyURL, "/")+"/models", nil)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if s.cfg.PolicyAPIKey != "" {
		up.Header.Set("Authorization", "Bearer "+s.cfg.PolicyAPIKey)
	}
	resp, err := s.cfg.HTTPClient.Do(up)
	if err != nil {
		writeError(w, http.StatusBadGateway, "policy server unreachable: "+err.Error())
		return
	}
	defer resp.Body.Close()
	if v := resp.Header.Get("Content-Type"); v != "" {
		w.Header().Set("Content-Type", v)
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, io.LimitReader(resp.Body, s.cfg.MaxChatBytes))
}

// chatMessage is an OpenAI chat message as it comes over the wire; content
// may be a string, null or an array of parts.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls,omitempty"`
}

func (m chatMessage) message() trajectory.Message {
	out := trajectory.Message{Role: m.Role, Content: trajectory.ContentText(m.Content), Name: m.Name, ToolCallID: m.ToolCallID}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, trajectory.FunctionCall{ID: tc.ID, Type: "function",
			Function: trajectory.Function{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
	}
	return out
}

type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message      chatMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	} `json:"choices"`
	Usage *trajectory.Usage `json:"usage"`
}

type chatChunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *trajectory.Usage `json:"usage"`
}

// modelAPI is one model endpoint the proxy serves: how to read its
// requests and answers into a ModelTurn.
type modelAPI struct {
	name string // trajectory.APIChat, ...
	path string // after the base URL's /v1
	// request parses a request body; msg is a one-line 400 when bad.
	request func(body []byte) (turn trajectory.ModelTurn, msg string)
	// tokenFields: the request takes Config.TokenIDs' fields.
	tokenFields bool
	// response parses a whole 200 answer into turn.
	response func(data []byte, turn *trajectory.ModelTurn) error
	// stream returns a decoder of the answer's server-sent events.
	stream func() streamDecoder
	// errorEvent is the SSE an upstream of this API sends on an error.
	errorEvent func(msg string) []byte
}

// streamDecoder reassembles a streamed answer.
type streamDecoder interface {
	// event takes one data: line's payload; name is the event: field of
	// the event it belongs to ("" when none).
	event(name string, data []byte)
	// complete: the stream's end marker arrived.
	complete() bool
	fill(turn *trajectory.ModelTurn)
}

// sessionKeys are the session keys of a request: the headers and body
// fields routers pin sessions by, passed upstream unchanged.
func sessionKeys(r *http.Request, body []byte) map[string]string {
	keys := map[string]string{}
	for _, h := range []string{"X-Session-ID", "X-SMG-Routing-Key"} {
		if v := r.Header.Get(h); v != "" {
			keys[strings.ToLower(h)] = v
		}
	}
	var b struct {
		SessionID string `json:"session_id"`
		CacheSalt string `json:"cache_salt"`
		Metadata  struct {
			SessionID string `json:"session_id"`
		} `json:"metadata"`
		ExtraBody struct {
			SessionID string `json:"session_id"`
			CacheSalt string `json:"cache_salt"`
		} `json:"extra_body"`
	}
	if json.Unmarshal(body, &b) == nil {
		for k, v := range map[string]string{"session_id": b.SessionID, "cache_salt": b.CacheSalt, "metadata.session_id": b.Metadata.SessionID,
			"extra_body.session_id": b.ExtraBody.SessionID, "extra_body.cache_salt": b.ExtraBody.CacheSalt} {
			if v != "" {
				keys[k] = v
			}
		}
	}
	if sid := r.PathValue("sid"); sid != "" {
		keys["path"] = sid
	}
	return keys
}

// The headers passed to the upstream as they came.
var passHeaders = []string{"Accept", "X-Session-ID", "X-SMG-Routing-Key", "Anthropic-Version", "Anthropic-Beta"}

func (s *Server) proxyModel(w http.ResponseWriter, r *http.Request, se *session, api *modelAPI) {
	if s.cfg.PolicyURL == "" {
		writeError(w, http.StatusServiceUnavailable, "no policy server configured: start the gateway with --policy-url http://HOST:PORT/v1")
		return
	}
	if st, _ := se.getState(); st != StateRunning {
		writeError(w, http.StatusConflict, fmt.Sprintf("episode %s is %s: its model turns are over; create a new episode", se.id, st))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxChatBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes: compact the conversation", mbe.Limit))
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		return
	}
	turn, msg := api.request(body)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	turn.API = api.name
	if v := r.Header.Get(trajectory.AuxiliaryHeader); v != "" && v != "0" && !strings.EqualFold(v, "false") {
		turn.Auxiliary = v
	}
	sent := body
	var added []string
	if api.tokenFields {
		if why := se.tokensRefused.Load(); why != nil {
			turn.TokensUnavailable = *why
		} else {
			fields, _ := trajectory.TokenFields(s.cfg.TokenIDs) // validated by Config
			sent, added = trajectory.AddFields(body, fields)
		}
	}
	turn.Session = sessionKeys(r, body)
	// The episode token never leaves the gateway.
	var auth func(h http.Header)
	switch {
	case s.cfg.PolicyAuth == PolicyAuthSession:
		sid := se.id
		if v := r.PathValue("sid"); v != "" {
			sid = v
		}
		auth = func(h http.Header) { h.Set("Authorization", "Bearer "+sid) }
		turn.Session["authorization"] = "Bearer " + sid
	case s.cfg.PolicyAPIKey != "":
		auth = func(h http.Header) {
			h.Set("Authorization", "Bearer "+s.cfg.PolicyAPIKey)
			if api.name == trajectory.APIMessages {
				h.Set("X-Api-Key", s.cfg.PolicyAPIKey)
			}
		}
	}
	if len(turn.Session) == 0 {
		turn.Session = nil
	}
	send := func(b []byte) (*http.Response, error) {
		up, err := http.NewRequestWithContext(r.Context(), http.MethodPost, strings.TrimRight(s.cfg.PolicyURL, "/")+api.path, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		up.Header.Set("Content-Type", "application/json")
		for _, h := range passHeaders {
			if v := r.Header.Get(h); v != "" {
				up.Header.Set(h, v)
			}
		}
		if auth != nil {
			auth(up.Header)
		}
		return s.cfg.HTTPClient.Do(up)
	}
	t0 := time.Now()
	resp, err := send(sent)
	if err == nil && len(added) > 0 && resp.StatusCode == http.StatusBadRequest {
		// A server that refuses the token-id fields is asked once more
		// as the client asked; the episode's later turns go as sent.
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if why := trajectory.RefusedFields(resp.StatusCode, data, added); why != "" {
			resp.Body.Close()
			s.log.Warn("policy server refuses token-id fields: the episode's samples will have no token ids", "episode_id", se.id, "err", why)
			se.tokensRefused.CompareAndSwap(nil, &why)
			turn.TokensUnavailable = why
			sent = body
			resp, err = send(sent)
		} else {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(data), resp.Body), resp.Body}
		}
	}
	turn.Tools, turn.Params = trajectory.RequestParts(sent)
	if err != nil {
		s.metrics.modelTurns.WithLabelValues("unreachable").Inc()
		writeError(w, http.StatusBadGateway, "policy server unreachable: "+err.Error())
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Cache-Control", "Retry-After", "Request-Id", "X-Request-Id"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	streamed := resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	var broken error
	if streamed {
		err, broken = relayStream(w, resp.Body, api, &turn)
	} else {
		err = relayJSON(w, resp.Body, resp.StatusCode == http.StatusOK, api, &turn)
	}
	turn.LatencyMS = time.Since(t0).Milliseconds()
	if broken != nil {
		// The upstream failed mid-stream: the client got an error event
		// and a cut connection (as from the upstream), and the partial
		// turn is recorded as failed.
		turn.Error = broken.Error()
		turn.Response.Role = trajectory.RoleAssistant
		s.metrics.modelTurns.WithLabelValues("broken").Inc()
		s.log.Warn("policy stream broke", "episode_id", se.id, "err", broken)
		if rerr := se.ep.RecordModelTurn(turn); rerr != nil {
			s.log.Warn("recording failed model turn", "episode_id", se.id, "err", rerr)
		}
		panic(http.ErrAbortHandler)
	}
	if err != nil {
		s.metrics.modelTurns.WithLabelValues("broken").Inc()
		s.log.Warn("proxying model turn", "episode_id", se.id, "err", err)
		return
	}
	if resp.StatusCode != http.StatusOK {
		s.metrics.modelTurns.WithLabelValues("upstream_error").Inc()
		return
	}
	turn.Response.Role = trajectory.RoleAssistant
	if err := se.ep.RecordModelTurn(turn); err != nil {
		s.metrics.modelTurns.WithLabelValues("unrecorded").Inc()
		s.log.Warn("recording model turn", "episode_id", se.id, "err", err)
		return
	}
	s.metrics.modelTurns.WithLabelValues("recorded").Inc()
}

// relayJSON copies a whole response and parses it into turn.
func relayJSON(w io.Writer, body io.Reader, ok bool, api *modelAPI, turn *trajectory.ModelTurn) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("read policy response: %w", err)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	if !ok {
		return nil
	}
	return api.response(data, turn)
}

// relayStream passes server-sent events through as they come, flushing
// after each event, and reassembles the answer into turn. broken is set
// when the upstream failed before its end marker: the client has then
// been sent an error event.
func relayStream(w io.Writer, body io.Reader, api *modelAPI, turn *trajectory.ModelTurn) (err, broken error) {
	fl, _ := w.(http.Flusher)
	flush := func() {
		if fl != nil {
			fl.Flush()
		}
	}
	br := bufio.NewReaderSize(body, 64<<10)
	dec := api.stream()
	event := ""
	for {
		line, rerr := br.ReadBytes('\n')
		if len(line) > 0 && (rerr == nil || bytes.HasSuffix(line, []byte("\n"))) {
			if _, werr := w.Write(line); werr != nil {
				return fmt.Errorf("write to client: %w", werr), nil
			}
			trimmed := bytes.TrimSpace(line)
			switch {
			case len(trimmed) == 0:
				flush()
				event = ""
			case bytes.HasPrefix(trimmed, []byte("event:")):
				event = string(bytes.TrimSpace(trimmed[len("event:"):]))
			case bytes.HasPrefix(trimmed, []byte("data:")):
				dec.event(event, bytes.TrimSpace(trimmed[len("data:"):]))
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			broken = fmt.Errorf("policy stream broke: %w", rerr)
			break
		}
	}
	dec.fill(turn)
	if broken == nil && !dec.complete() {
		broken = errors.New("policy stream ended before its end marker")
	}
	if broken != nil {
		w.Write(api.errorEvent("rollcage: the policy server's stream broke off: " + broken.Error()))
	}
	flush()
	return nil, broken
}

// OpenAI chat completions.

var chatAPI = &modelAPI{
	name: trajectory.APIChat, path: "/chat/completions", tokenFields: true,
	request: func(body []byte) (trajectory.ModelTurn, string) {
		var req struct {
			Model    string        `json:"model"`
			Messages []chatMessage `json:"messages"`
		}
		if msg := lenientDecode(body, &req); msg != "" {
			return trajectory.ModelTurn{}, msg
		}
		if len(req.Messages) == 0 {
			return trajectory.ModelTurn{}, `field "messages": missing or empty: send the conversation`
		}
		msgs := make([]trajectory.Message, len(req.Messages))
		for i, m := range req.Messages {
			msgs[i] = m.message()
		}
		return trajectory.ModelTurn{Model: req.Model, Request: msgs}, ""
	},
	response: func(data []byte, turn *trajectory.ModelTurn) error {
		var cr chatResponse
		if err := json.Unmarshal(data, &cr); err != nil {
			return fmt.Errorf("policy response is not a chat completion: %w", err)
		}
		if len(cr.Choices) == 0 {
			return errors.New("policy response has no choices")
		}
		var o oaStream // a whole answer reads as a one-chunk stream
		o.take(data)
		o.finish = cr.Choices[0].FinishReason
		o.fillWith(turn, cr.Choices[0].Message.message())
		return nil
	},
	stream:     func() streamDecoder { return &chatStream{calls: map[int]*streamCall{}} },
	errorEvent: openAIErrorEvent,
}

// openAIErrorEvent is the error an OpenAI-compatible server sends in a
// stream; the OpenAI SDKs raise it.
func openAIErrorEvent(msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "code": "upstream_stream_broken"}})
	return append(append([]byte("data: "), b...), "\n\n"...)
}

// lenientDecode decodes a proxied body, passing unknown fields: the
// proxy forwards every field it does not know.
func lenientDecode(body []byte, v any) string {
	if err := json.Unmarshal(body, v); err != nil {
		msg := decodeStrict(body, v)
		if msg == "" || strings.Contains(msg, "unknown field") {
			msg = "malformed JSON: " + err.Error()
		}
		return msg
	}
	return ""
}

type streamCall struct{ id, name, args string }

// oaStream is what OpenAI's streamed APIs (chat completions,
// completions) share: the [DONE] marker, model, usage, the finish reason
// and the served token data.
type oaStream struct {
	sv       trajectory.Served
	model    string
	usage    *trajectory.Usage
	finish   string
	done     bool
	finished bool
}

// take reads a chunk's shared fields; false for [DONE] or a chunk that
// is not JSON.
func (o *oaStream) take(data []byte) bool {
	if bytes.Equal(data, []byte("[DONE]")) {
		o.done = true
		return false
	}
	o.sv.Add(data)
	var ck struct {
		Model string            `json:"model"`
		Usage *trajectory.Usage `json:"usage"`
	}
	if json.Unmarshal(data, &ck) != nil {
		return false
	}
	if ck.Model != "" {
		o.model = ck.Model
	}
	if ck.Usage != nil {
		o.usage = ck.Usage
	}
	return true
}

func (o *oaStream) finishAs(r *string) {
	if r != nil {
		o.finish, o.finished = *r, true
	}
}

// complete: [DONE], or a finish reason from a server that sends no
// [DONE].
func (o *oaStream) complete() bool { return o.done || o.finished }

// fillWith fills turn with the response and the shared fields.
func (o *oaStream) fillWith(turn *trajectory.ModelTurn, resp trajectory.Message) {
	if o.model != "" {
		turn.Model = o.model
	}
	if o.usage != nil {
		turn.Usage = *o.usage
	}
	turn.FinishReason = o.finish
	turn.Response = resp
	o.sv.Fill(turn)
}

type chatStream struct {
	oaStream
	content strings.Builder
	calls   map[int]*streamCall
}

func (c *chatStream) event(_ string, data []byte) {
	var ck chatChunk
	if !c.take(data) || json.Unmarshal(data, &ck) != nil {
		return
	}
	for _, ch := range ck.Choices {
		if ch.Index != 0 {
			continue
		}
		if ch.Delta.Content != nil {
			c.content.WriteString(*ch.Delta.Content)
		}
		for _, tc := range ch.Delta.ToolCalls {
			sc := c.calls[tc.Index]
			if sc == nil {
				sc = &streamCall{}
				c.calls[tc.Index] = sc
			}
			sc.id += tc.ID
			sc.name += tc.Function.Name
			sc.args += tc.Function.Arguments
		}
		c.finishAs(ch.FinishReason)
	}
}

func (c *chatStream) fill(turn *trajectory.ModelTurn) {
	c.fillWith(turn, trajectory.Message{Role: trajectory.RoleAssistant, Content: c.content.String(), ToolCalls: sortedCalls(c.calls)})
}

func sortedCalls(calls map[int]*streamCall) []trajectory.FunctionCall {
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	var out []trajectory.FunctionCall
	for _, i := range idx {
		c := calls[i]
		out = append(out, trajectory.FunctionCall{ID: c.id, Type: "function", Function: trajectory.Function{Name: c.name, Arguments: c.args}})
	}
	return out
}

// OpenAI completions (a prompt, no messages).

var completionsAPI = &modelAPI{
	name: trajectory.APICompletions, path: "/completions", tokenFields: true,
	request: func(body []byte) (trajectory.ModelTurn, string) {
		var req struct {
			Model  string          `json:"model"`
			Prompt json.RawMessage `json:"prompt"`
		}
		if msg := lenientDecode(body, &req); msg != "" {
			return trajectory.ModelTurn{}, msg
		}
		var prompt string
		if json.Unmarshal(req.Prompt, &prompt) != nil || prompt == "" {
			if len(req.Prompt) == 0 || string(req.Prompt) == "null" {
				return trajectory.ModelTurn{}, `field "prompt": missing: send the prompt (a string, or token ids)`
			}
			prompt = string(req.Prompt) // token ids or a batch, kept as sent
		}
		return trajectory.ModelTurn{Model: req.Model, Prompt: prompt}, ""
	},
	response: func(data []byte, turn *trajectory.ModelTurn) error {
		var cr struct {
			Model   string `json:"model"`
			Choices []struct {
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage *trajectory.Usage `json:"usage"`
		}
		if err := json.Unmarshal(data, &cr); err != nil {
			return fmt.Errorf("policy response is not a completion: %w", err)
		}
		if len(cr.Choices) == 0 {
			return errors.New("policy response has no choices")
		}
		var o oaStream
		o.take(data)
		o.finish = cr.Choices[0].FinishReason
		o.fillWith(turn, trajectory.Message{Role: trajectory.RoleAssistant, Content: cr.Choices[0].Text})
		return nil
	},
	stream:     func() streamDecoder { return &completionStream{} },
	errorEvent: openAIErrorEvent,
}

type completionStream struct {
	oaStream
	text strings.Builder
}

func (c *completionStream) event(_ string, data []byte) {
	var ck struct {
		Choices []struct {
			Index        int     `json:"index"`
			Text         string  `json:"text"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if !c.take(data) || json.Unmarshal(data, &ck) != nil {
		return
	}
	for _, ch := range ck.Choices {
		if ch.Index != 0 {
			continue
		}
		c.text.WriteString(ch.Text)
		c.finishAs(ch.FinishReason)
	}
}

func (c *completionStream) fill(turn *trajectory.ModelTurn) {
	c.fillWith(turn, trajectory.Message{Role: trajectory.RoleAssistant, Content: c.text.String()})
}
