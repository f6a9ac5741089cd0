package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rollcage/rollcage/trajectory"
)

// Anthropic's Messages API (POST /v1/messages), as coding agents that
// speak it (claude-code) send it: a system prompt beside the messages,
// content as blocks (text, tool_use, tool_result), answers as blocks, and
// streams of typed events (message_start, content_block_start,
// content_block_delta, content_block_stop, message_delta, message_stop).

// anthropicBlock is one content block of a message or an answer.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"` // tool_result: a string or blocks
	IsError   bool            `json:"is_error,omitempty"`
}

// anthropicContent reads a content field: a string or blocks.
func anthropicContent(raw json.RawMessage) []anthropicBlock {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var blocks []anthropicBlock
	if json.Unmarshal(raw, &blocks) == nil {
		return blocks
	}
	return []anthropicBlock{{Type: "text", Text: string(raw)}}
}

// anthropicMessages turns a request's system and messages into the
// OpenAI message model trajectories use: tool_use blocks become tool
// calls, tool_result blocks tool messages.
func anthropicMessages(system json.RawMessage, msgs []struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}) []trajectory.Message {
	var out []trajectory.Message
	if blocks := anthropicContent(system); len(blocks) > 0 {
		out = append(out, trajectory.Message{Role: trajectory.RoleSystem, Content: blocksText(blocks)})
	}
	for _, m := range msgs {
		var text strings.Builder
		msg := trajectory.Message{Role: m.Role}
		for _, b := range anthropicContent(m.Content) {
			switch b.Type {
			case "text":
				text.WriteString(b.Text)
			case "tool_use":
				msg.ToolCalls = append(msg.ToolCalls, toolUseCall(b.ID, b.Name, string(b.Input)))
			case "tool_result":
				out = append(out, trajectory.Message{Role: trajectory.RoleTool, ToolCallID: b.ToolUseID, Content: blocksText(anthropicContent(b.Content))})
			}
		}
		msg.Content = text.String()
		if msg.Content != "" || len(msg.ToolCalls) > 0 || m.Role == trajectory.RoleAssistant {
			out = append(out, msg)
		}
	}
	return out
}

func toolUseCall(id, name, input string) trajectory.FunctionCall {
	if input == "" {
		input = "{}"
	}
	return trajectory.FunctionCall{ID: id, Type: "function", Function: trajectory.Function{Name: name, Arguments: input}}
}

func blocksText(blocks []anthropicBlock) string {
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

func (u anthropicUsage) usage() trajectory.Usage {
	return trajectory.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
}

var messagesAPI = &modelAPI{
	name: trajectory.APIMessages, path: "/messages",
	request: func(body []byte) (trajectory.ModelTurn, string) {
		var req struct {
			Model    string          `json:"model"`
			System   json.RawMessage `json:"system"`
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if msg := lenientDecode(body, &req); msg != "" {
			return trajectory.ModelTurn{}, msg
		}
		if len(req.Messages) == 0 {
			return trajectory.ModelTurn{}, `field "messages": missing or empty: send the conversation`
		}
		return trajectory.ModelTurn{Model: req.Model, Request: anthropicMessages(req.System, req.Messages)}, ""
	},
	response: func(data []byte, turn *trajectory.ModelTurn) error {
		var mr struct {
			Type       string           `json:"type"`
			Model      string           `json:"model"`
			Content    []anthropicBlock `json:"content"`
			StopReason string           `json:"stop_reason"`
			Usage      anthropicUsage   `json:"usage"`
		}
		if err := json.Unmarshal(data, &mr); err != nil || mr.Type != "message" {
			return fmt.Errorf("policy response is not an Anthropic message (type %q): %v", mr.Type, err)
		}
		turn.Response = trajectory.Message{Role: trajectory.RoleAssistant}
		var text strings.Builder
		for _, b := range mr.Content {
			switch b.Type {
			case "text":
				text.WriteString(b.Text)
			case "tool_use":
				turn.Response.ToolCalls = append(turn.Response.ToolCalls, toolUseCall(b.ID, b.Name, string(b.Input)))
			}
		}
		turn.Response.Content = text.String()
		turn.FinishReason = mr.StopReason
		if mr.Model != "" {
			turn.Model = mr.Model
		}
		turn.Usage = mr.Usage.usage()
		return nil
	},
	stream: func() streamDecoder { return &messagesStream{blocks: map[int]*streamCall{}} },
	errorEvent: func(msg string) []byte {
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}})
		return append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
	},
}

// messagesStream reassembles an Anthropic stream: text deltas into the
// content, input_json deltas into each tool_use block's arguments.
type messagesStream struct {
	text   strings.Builder
	blocks map[int]*streamCall // tool_use blocks by index
	model  string
	usage  anthropicUsage
	stop   string
	done   bool
	err    error
}

func (m *messagesStream) event(name string, data []byte) {
	var ev struct {
		Type    string `json:"type"`
		Index   int    `json:"index"`
		Message struct {
			Model string         `json:"model"`
			Usage anthropicUsage `json:"usage"`
		} `json:"message"`
		ContentBlock anthropicBlock `json:"content_block"`
		Delta        struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
			StopReason  string `json:"stop_reason"`
		} `json:"delta"`
		Usage *anthropicUsage `json:"usage"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	if ev.Type == "" {
		ev.Type = name
	}
	switch ev.Type {
	case "message_start":
		m.model, m.usage = ev.Message.Model, ev.Message.Usage
	case "content_block_start":
		if ev.ContentBlock.Type == "tool_use" {
			m.blocks[ev.Index] = &streamCall{id: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
		} else {
			m.text.WriteString(ev.ContentBlock.Text)
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			m.text.WriteString(ev.Delta.Text)
		case "input_json_delta":
			if b := m.blocks[ev.Index]; b != nil {
				b.args += ev.Delta.PartialJSON
			}
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			m.stop = ev.Delta.StopReason
		}
		if ev.Usage != nil {
			m.usage.OutputTokens = ev.Usage.OutputTokens
			if ev.Usage.InputTokens > 0 {
				m.usage.InputTokens = ev.Usage.InputTokens
			}
		}
	case "message_stop":
		m.done = true
	case "error":
		m.err = errors.New(ev.Error.Message)
	}
}

// complete: message_stop arrived (an error event is the upstream's own
// failure, passed through as it came).
func (m *messagesStream) complete() bool { return m.done || m.err != nil }

func (m *messagesStream) fill(turn *trajectory.ModelTurn) {
	if m.model != "" {
		turn.Model = m.model
	}
	turn.Usage = m.usage.usage()
	turn.FinishReason = m.stop
	turn.Response = trajectory.Message{Role: trajectory.RoleAssistant, Content: m.text.String(), ToolCalls: sortedCalls(m.blocks)}
	for i := range turn.Response.ToolCalls {
		if turn.Response.ToolCalls[i].Function.Arguments == "" {
			turn.Response.ToolCalls[i].Function.Arguments = "{}"
		}
	}
	if m.err != nil {
		turn.Error = "policy server: " + m.err.Error()
	}
}
