package audit

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/rollcage/rollcage/toolcall"
)

// message is an OpenAI chat message as third parties write it: content
// as a string or as a list of parts, tool calls new-style or the legacy
// function_call.
type message struct {
	Role       string     `json:"role"`
	Content    flatText   `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls"`
	ToolCallID string     `json:"tool_call_id"`
	Name       string     `json:"name"`
	FuncCall   *function  `json:"function_call"`
	// Extra is what mini-swe-agent keeps beside a message (the raw
	// response, timings): a third of its files' bytes.
	Extra skip `json:"extra"`
}

type toolCall struct {
	ID       string   `json:"id"`
	Function function `json:"function"`
}

type function struct {
	Name      string  `json:"name"`
	Arguments argText `json:"arguments"` // a JSON string, or (some writers) an object
}

// meta is the episode metadata third parties put beside the messages,
// under any of these common names.
type meta struct {
	ID         string          `json:"id"`
	EpisodeID  string          `json:"episode_id"`
	InstanceID string          `json:"instance_id"`
	TaskID     string          `json:"task_id"`
	Resolved   *bool           `json:"resolved"`
	Patch      string          `json:"patch"`
	ModelPatch string          `json:"model_patch"`
	Submission string          `json:"submission"`
	Task       json.RawMessage `json:"task"`
	Metadata   json.RawMessage `json:"metadata"`
	Info       json.RawMessage `json:"info"`
}

// metaOf decodes the metadata fields of an object already split into
// its keys, without encoding the (often large) rest again.
func metaOf(obj map[string]json.RawMessage) meta {
	var m meta
	for k, dst := range map[string]any{"id": &m.ID, "episode_id": &m.EpisodeID, "instance_id": &m.InstanceID,
		"task_id": &m.TaskID, "resolved": &m.Resolved, "patch": &m.Patch, "model_patch": &m.ModelPatch,
		"submission": &m.Submission, "task": &m.Task, "metadata": &m.Metadata, "info": &m.Info} {
		if v, ok := obj[k]; ok {
			_ = json.Unmarshal(v, dst)
		}
	}
	return m
}

// parseMessageObject reads {"messages": [...], metadata...}; msgs are the
// messages when already decoded (nil: decode obj's).
func parseMessageObject(base, name string, obj map[string]json.RawMessage, msgs []message) (Trace, error) {
	if msgs == nil {
		var err error
		if msgs, err = decodeMessages(obj["messages"], `"messages" is not a list of messages`); err != nil {
			return Trace{}, err
		}
	}
	// A litellm request/response log (OpenHands llm_completions): the
	// messages are the conversation so far, the response the turn that
	// answered it.
	if has(obj, "response") {
		var resp struct {
			Choices []struct {
				Message json.RawMessage `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal(obj["response"], &resp) == nil && len(resp.Choices) > 0 && len(resp.Choices[0].Message) > 0 {
			last, err := messagesOf(append(make([]json.RawMessage, len(msgs)), resp.Choices[0].Message), len(msgs))
			if err != nil {
				return Trace{}, err
			}
			msgs = append(msgs, last...)
		}
	}
	m := metaOf(obj)
	// Nested metadata / info (mini-swe-agent) fill what the top level lacks.
	for _, nested := range []json.RawMessage{m.Metadata, m.Info} {
		if len(nested) == 0 {
			continue
		}
		var n meta
		if json.Unmarshal(nested, &n) != nil {
			continue
		}
		m.ID = firstNonEmpty(m.ID, n.ID)
		m.EpisodeID = firstNonEmpty(m.EpisodeID, n.EpisodeID)
		m.InstanceID = firstNonEmpty(m.InstanceID, n.InstanceID)
		m.TaskID = firstNonEmpty(m.TaskID, n.TaskID)
		m.Patch = firstNonEmpty(m.Patch, n.Patch)
		m.ModelPatch = firstNonEmpty(m.ModelPatch, n.ModelPatch)
		m.Submission = firstNonEmpty(m.Submission, n.Submission)
		if m.Resolved == nil {
			m.Resolved = n.Resolved
		}
		if len(m.Task) == 0 {
			m.Task = n.Task
		}
	}
	return parseMessages(base, name, msgs, &m)
}

// decodeMessages decodes a JSON list of chat messages in one pass. A list
// with an element that is no chat message is decoded again element by
// element, to say which one; what names the list in the error when it is
// not one.
func decodeMessages(data []byte, what string) ([]message, error) {
	var msgs []message
	if json.Unmarshal(data, &msgs) == nil && !slices.ContainsFunc(msgs, func(m message) bool { return m.Role == "" }) {
		return msgs, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	return messagesOf(raws, 0)
}

// messagesOf decodes raws[from:], each a chat message with a role.
func messagesOf(raws []json.RawMessage, from int) ([]message, error) {
	msgs := make([]message, 0, len(raws)-from)
	for i := from; i < len(raws); i++ {
		var msg message
		if err := json.Unmarshal(raws[i], &msg); err != nil || msg.Role == "" {
			return nil, fmt.Errorf("message %d is not a chat message with a role", i)
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// bashBlocks finds mini-swe-agent's actions, fenced bash blocks, as the
// regexp (?s)```(?:bash|sh|shell)[ \t]*\n(.*?)\n?``` finds them
// (TestBashBlocks holds it to it), without one: the first block's text and how many blocks (at most 2) there
// are. It follows the regexp's leftmost-first search: a block opens at
// the first "```" followed by a language (bash, sh, shell), blanks and a
// newline; its text ends at the first "```" after that, a newline before
// it left out; the next block is searched for after that "```".
func bashBlocks(s string) (first string, n int) {
	for i := 0; n < 2; {
		j := strings.Index(s[i:], "```")
		if j < 0 {
			break
		}
		i += j
		start, ok := blockHeader(s, i+3)
		if !ok {
			i++ // "````bash" opens one backtick on
			continue
		}
		k := strings.Index(s[start:], "```")
		if k < 0 {
			break // no later opening closes either
		}
		end := start + k
		if end > start && s[end-1] == '\n' {
			end--
		}
		if n == 0 {
			first = s[start:end]
		}
		n++
		i = start + k + 3
	}
	return first, n
}

// blockHeader matches (?:bash|sh|shell)[ \t]*\n at s[i:] (as the
// regexp's alternation tries them, shell after sh fails) and returns the
// index after the newline.
func blockHeader(s string, i int) (int, bool) {
	for _, lang := range []string{"bash", "sh", "shell"} {
		if !strings.HasPrefix(s[i:], lang) {
			continue
		}
		j := i + len(lang)
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		if j < len(s) && s[j] == '\n' {
			return j + 1, true
		}
	}
	return 0, false
}

// parseMessages maps a message list onto steps: assistant tool calls
// matched to tool results by id; with no tool calls at all, bash blocks
// in the assistant's text answered by the next user message
// (mini-swe-agent). A step's Index is its message's.
func parseMessages(base, name string, msgs []message, m *meta) (Trace, error) {
	ep := Trace{ID: base, Source: name, Format: FormatOpenAI}
	if m != nil {
		ep.ID = firstNonEmpty(m.EpisodeID, m.ID, m.InstanceID, m.TaskID, base)
		ep.TaskID = firstNonEmpty(m.TaskID, m.InstanceID)
		ep.Resolved = m.Resolved
		ep.Patch = firstNonEmpty(m.Patch, m.ModelPatch, m.Submission)
		if len(m.Task) > 0 {
			var tj taskJSON
			if err := json.Unmarshal(m.Task, &tj); err == nil {
				t := tj.task()
				ep.Task = &t
				ep.TaskID = firstNonEmpty(ep.TaskID, t.ID)
			}
		}
	}
	var users []string
	for _, msg := range msgs {
		if msg.Role == "user" {
			users = append(users, string(msg.Content))
			if len(users) == 3 {
				break
			}
		}
	}
	setInstruction(&ep, users...)
	toolCalls := 0
	for _, msg := range msgs {
		toolCalls += len(msg.ToolCalls)
		if msg.FuncCall != nil {
			toolCalls++
		}
	}
	if toolCalls > 0 {
		byID := map[string]int{}
		lastLegacy := -1
		for mi, msg := range msgs {
			switch msg.Role {
			case "assistant":
				for _, tc := range msg.ToolCalls {
					byID[tc.ID] = len(ep.Steps)
					st := foreignStep(tc.Function.Name, string(tc.Function.Arguments))
					st.Index = mi
					ep.Steps = append(ep.Steps, st)
				}
				if msg.FuncCall != nil {
					lastLegacy = len(ep.Steps)
					st := foreignStep(msg.FuncCall.Name, string(msg.FuncCall.Arguments))
					st.Index = mi
					ep.Steps = append(ep.Steps, st)
				}
			case "tool":
				if i, ok := byID[msg.ToolCallID]; ok {
					ep.Steps[i].Output = string(msg.Content)
				}
			case "function":
				if lastLegacy >= 0 {
					ep.Steps[lastLegacy].Output = string(msg.Content)
				}
			}
		}
		return ep, nil
	}
	ep.Format = FormatMiniSWE
	pending := -1
	for mi, msg := range msgs {
		switch msg.Role {
		case "assistant":
			pending = -1
			block, n := bashBlocks(string(msg.Content))
			// mini-swe-agent runs exactly one block per turn; a turn with
			// more is rejected ("Please always provide EXACTLY ONE
			// action") and runs nothing.
			if n != 1 {
				continue
			}
			pending = len(ep.Steps)
			cmd := strings.TrimSpace(block)
			st := Step{Index: mi}
			st.set(bash(cmd))
			if isMiniSubmit(cmd) {
				st.set(call(toolcall.Submit, toolcall.SubmitArgs{}))
				st.Original = cmd
			}
			ep.Steps = append(ep.Steps, st)
		case "user", "tool":
			if pending >= 0 {
				ep.Steps[pending].Output = stripObservation(string(msg.Content))
				pending = -1
			}
		}
	}
	if len(ep.Steps) == 0 {
		return Trace{}, errors.New("no tool calls: no assistant tool_calls and no ```bash blocks; nothing to audit")
	}
	return ep, nil
}

// setInstruction fills the episode's instruction, when its metadata had
// none, with the first of the user messages that is not a demonstration
// (SWE-agent 0.x shows one first).
func setInstruction(ep *Trace, users ...string) {
	if ep.Task != nil && ep.Task.Instruction != "" {
		return
	}
	for _, u := range users {
		u = strings.TrimSpace(u)
		if u == "" || strings.HasPrefix(u, "Here is a demonstration") {
			continue
		}
		if ep.Task == nil {
			ep.Task = &Task{}
		}
		ep.Task.Instruction = u
		return
	}
}

func isMiniSubmit(cmd string) bool {
	return strings.Contains(cmd, "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT") || strings.Contains(cmd, "MINI_SWE_AGENT_FINAL_OUTPUT")
}

var obsTags = regexp.MustCompile(`(?s)<returncode>.*?</returncode>\s*|</?output>`)

// stripObservation drops mini-swe-agent's <returncode>/<output> framing.
func stripObservation(s string) string {
	return strings.TrimSpace(obsTags.ReplaceAllString(s, ""))
}

func foreignStep(name, args string) Step {
	var st Step
	st.set(mapTool(name, args))
	if st.Call.Tool != strings.ToLower(name) {
		st.Original = name + " " + clip(args, 2000)
	}
	return st
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + " … " + s[len(s)-n/2:]
}
