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

// The recording proxy forwards a chat-completions request to the policy
// server unchanged and answers with the server's response unchanged
// (streamed chunk by chunk when the request streams), and records the
// request's messages, tools list and sampling parameters and the response
// (reassembled from the chunks), with prompt and completion token ids,
// logprobs, token strings and alternatives when the server returned them
// (trajectory.Served), as a model turn of the episode. With Config.TokenIDs
// it first adds the fields that ask the server for them.

func (s *Server) handleChatEpisode(w http.ResponseWriter, r *http.Request, c caller) {
	se, ok := s.episodeFor(w, r, c)
	if !ok {
		return
	}
	s.proxyChat(w, r, se)
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request, c caller) {
	if c.se == nil {
		writeError(w, http.StatusBadRequest, "the admin token names no episode: use the episode's token here, or POST /v1/episodes/{id}/chat/completions")
		return
	}
	c.se.touch(time.Now())
	s.proxyChat(w, r, c.se)
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
	out := trajectory.Message{Role: m.Role, Content: contentText(m.Content), Name: m.Name, ToolCallID: m.ToolCallID}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, trajectory.FunctionCall{ID: tc.ID, Type: "function",
			Function: trajectory.Function{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
	}
	return out
}

// contentText flattens a message content: a string, or the text parts of
// an array of parts.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
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

func (s *Server) proxyChat(w http.ResponseWriter, r *http.Request, se *session) {
	if s.cfg.PolicyURL == "" {
		writeError(w, http.StatusServiceUnavailable, "no policy server configured: start the gateway with --policy-url http://HOST:PORT/v1")
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
	var req struct {
		Model    string        `json:"model"`
		Messages []chatMessage `json:"messages"`
		Stream   bool          `json:"stream"`
	}
	// Not strict: the proxy passes every field it does not know through.
	if err := json.Unmarshal(body, &req); err != nil {
		msg := decodeStrict(body, &req)
		if msg == "" {
			msg = "malformed JSON: " + err.Error()
		}
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, `field "messages": missing or empty: send the conversation`)
		return
	}
	msgs := make([]trajectory.Message, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = m.message()
	}
	fields, _ := trajectory.TokenFields(s.cfg.TokenIDs) // validated by Config
	body = trajectory.WithFields(body, fields)
	tools, params := trajectory.RequestParts(body)

	up, err := http.NewRequestWithContext(r.Context(), http.MethodPost, strings.TrimRight(s.cfg.PolicyURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	up.Header.Set("Content-Type", "application/json")
	if a := r.Header.Get("Accept"); a != "" {
		up.Header.Set("Accept", a)
	}
	// The episode token never leaves the gateway.
	if s.cfg.PolicyAPIKey != "" {
		up.Header.Set("Authorization", "Bearer "+s.cfg.PolicyAPIKey)
	}
	t0 := time.Now()
	resp, err := s.cfg.HTTPClient.Do(up)
	if err != nil {
		s.metrics.modelTurns.WithLabelValues("unreachable").Inc()
		writeError(w, http.StatusBadGateway, "policy server unreachable: "+err.Error())
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Cache-Control", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	turn := trajectory.ModelTurn{Model: req.Model, Request: msgs, Tools: tools, Params: params}
	streamed := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	if streamed {
		err = relayStream(w, resp.Body, &turn)
	} else {
		err = relayJSON(w, resp.Body, resp.StatusCode == http.StatusOK, &turn)
	}
	turn.LatencyMS = time.Since(t0).Milliseconds()
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
func relayJSON(w io.Writer, body io.Reader, ok bool, turn *trajectory.ModelTurn) error {
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
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return fmt.Errorf("policy response is not a chat completion: %w", err)
	}
	if len(cr.Choices) == 0 {
		return errors.New("policy response has no choices")
	}
	ch := cr.Choices[0]
	turn.Response = ch.Message.message()
	turn.FinishReason = ch.FinishReason
	if cr.Model != "" {
		turn.Model = cr.Model
	}
	if cr.Usage != nil {
		turn.Usage = *cr.Usage
	}
	var sv trajectory.Served
	sv.Add(data)
	sv.Fill(turn)
	return nil
}

// relayStream passes server-sent events through as they come, flushing
// after each event, and reassembles choice 0 into turn.
func relayStream(w io.Writer, body io.Reader, turn *trajectory.ModelTurn) error {
	fl, _ := w.(http.Flusher)
	br := bufio.NewReaderSize(body, 64<<10)
	var content strings.Builder
	type call struct{ id, name, args string }
	calls := map[int]*call{}
	var sv trajectory.Served
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := w.Write(line); werr != nil {
				return fmt.Errorf("write to client: %w", werr)
			}
			if len(bytes.TrimSpace(line)) == 0 && fl != nil {
				fl.Flush()
			}
			if data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:")); ok {
				data = bytes.TrimSpace(data)
				if !bytes.Equal(data, []byte("[DONE]")) {
					sv.Add(data)
					var ck chatChunk
					if json.Unmarshal(data, &ck) == nil {
						if ck.Model != "" {
							turn.Model = ck.Model
						}
						if ck.Usage != nil {
							turn.Usage = *ck.Usage
						}
						for _, ch := range ck.Choices {
							if ch.Index != 0 {
								continue
							}
							if ch.Delta.Content != nil {
								content.WriteString(*ch.Delta.Content)
							}
							for _, tc := range ch.Delta.ToolCalls {
								c := calls[tc.Index]
								if c == nil {
									c = &call{}
									calls[tc.Index] = c
								}
								c.id += tc.ID
								c.name += tc.Function.Name
								c.args += tc.Function.Arguments
							}
							if ch.FinishReason != nil {
								turn.FinishReason = *ch.FinishReason
							}
						}
					}
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read policy stream: %w", err)
		}
	}
	if fl != nil {
		fl.Flush()
	}
	turn.Response = trajectory.Message{Role: trajectory.RoleAssistant, Content: content.String()}
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		c := calls[i]
		turn.Response.ToolCalls = append(turn.Response.ToolCalls, trajectory.FunctionCall{ID: c.id, Type: "function",
			Function: trajectory.Function{Name: c.name, Arguments: c.args}})
	}
	sv.Fill(turn)
	return nil
}
