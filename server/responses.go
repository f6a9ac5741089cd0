package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rollcage/rollcage/trajectory"
)

// OpenAI's Responses API (POST /v1/responses), as Codex and slime's
// Responses adapter send it: instructions beside an input that is a
// string or a list of items (messages, function_call,
// function_call_output), answers as output items. A streamed answer's
// response.completed event carries the whole response, which is what is
// recorded.

// responsesItem is one input or output item.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"` // a string or parts
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"` // function_call_output: a string or parts
}

// responsesText reads a content or output field: a string, or parts
// whose texts are joined by newlines.
func responsesText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var texts []string
	for _, p := range parts {
		if t := p.Text + p.Refusal; t != "" {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, "\n")
}

// responsesMessages turns items into the OpenAI chat message model
// trajectories use: consecutive function calls join one assistant
// message's tool calls, function_call_output items become tool messages.
func responsesMessages(items []responsesItem) []trajectory.Message {
	var out []trajectory.Message
	for _, it := range items {
		switch it.Type {
		case "function_call":
			call := trajectory.FunctionCall{ID: it.CallID, Type: "function", Function: trajectory.Function{Name: it.Name, Arguments: it.Arguments}}
			if n := len(out); n > 0 && out[n-1].Role == trajectory.RoleAssistant && len(out[n-1].ToolCalls) > 0 {
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, call)
				continue
			}
			out = append(out, trajectory.Message{Role: trajectory.RoleAssistant, ToolCalls: []trajectory.FunctionCall{call}})
		case "function_call_output":
			out = append(out, trajectory.Message{Role: trajectory.RoleTool, ToolCallID: it.CallID, Content: responsesText(it.Output)})
		case "message", "":
			role := it.Role
			if role == "developer" {
				role = trajectory.RoleSystem
			}
			out = append(out, trajectory.Message{Role: role, Content: responsesText(it.Content)})
		}
		// Other items (reasoning, web search calls) carry no chat message.
	}
	return out
}

// responsesBody is a whole response (or a streamed response.completed's
// response).
type responsesBody struct {
	Model  string          `json:"model"`
	Status string          `json:"status"`
	Output []responsesItem `json:"output"`
	Usage  *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// fill records the response into turn: its output items as one
// assistant message, the status as the finish reason.
func (r responsesBody) fill(turn *trajectory.ModelTurn) {
	if r.Model != "" {
		turn.Model = r.Model
	}
	msg := trajectory.Message{Role: trajectory.RoleAssistant}
	var texts []string
	for _, m := range responsesMessages(r.Output) {
		if m.Role != trajectory.RoleAssistant {
			continue
		}
		if m.Content != "" {
			texts = append(texts, m.Content)
		}
		msg.ToolCalls = append(msg.ToolCalls, m.ToolCalls...)
	}
	msg.Content = strings.Join(texts, "\n")
	turn.Response = msg
	turn.FinishReason = r.Status
	if r.Usage != nil {
		turn.Usage = trajectory.Usage{PromptTokens: r.Usage.InputTokens, CompletionTokens: r.Usage.OutputTokens, TotalTokens: r.Usage.TotalTokens}
	}
}

var responsesAPI = &modelAPI{
	name: trajectory.APIResponses, path: "/responses",
	request: func(body []byte) (trajectory.ModelTurn, string) {
		var req struct {
			Model        string          `json:"model"`
			Instructions string          `json:"instructions"`
			Input        json.RawMessage `json:"input"`
		}
		if msg := lenientDecode(body, &req); msg != "" {
			return trajectory.ModelTurn{}, msg
		}
		var msgs []trajectory.Message
		if req.Instructions != "" {
			msgs = append(msgs, trajectory.Message{Role: trajectory.RoleSystem, Content: req.Instructions})
		}
		var text string
		var items []responsesItem
		switch {
		case json.Unmarshal(req.Input, &text) == nil && text != "":
			msgs = append(msgs, trajectory.Message{Role: trajectory.RoleUser, Content: text})
		case json.Unmarshal(req.Input, &items) == nil && len(items) > 0:
			msgs = append(msgs, responsesMessages(items)...)
		default:
			return trajectory.ModelTurn{}, `field "input": missing or empty: send the input (a string or a list of items)`
		}
		return trajectory.ModelTurn{Model: req.Model, Request: msgs}, ""
	},
	response: func(data []byte, turn *trajectory.ModelTurn) error {
		var r responsesBody
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("policy response is not a response: %w", err)
		}
		if r.Output == nil {
			return errors.New("policy response has no output")
		}
		r.fill(turn)
		return nil
	},
	stream:     func() streamDecoder { return &responsesStream{} },
	errorEvent: responsesErrorEvent,
}

// responsesErrorEvent is the error event of a Responses stream; the
// OpenAI SDKs raise it.
func responsesErrorEvent(msg string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "code": "upstream_stream_broken", "message": msg})
	return append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
}

// responsesStream keeps a stream's final response: the
// response.completed (or .incomplete, .failed) event carries it whole.
type responsesStream struct {
	final *responsesBody
}

func (s *responsesStream) event(_ string, data []byte) {
	var ev struct {
		Type     string        `json:"type"`
		Response responsesBody `json:"response"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	switch ev.Type {
	case "response.completed", "response.incomplete", "response.failed":
		s.final = &ev.Response
	}
}

func (s *responsesStream) complete() bool { return s.final != nil }

func (s *responsesStream) fill(turn *trajectory.ModelTurn) {
	if s.final != nil {
		s.final.fill(turn)
	}
}
