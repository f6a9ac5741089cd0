package trajectory

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// RequestParts splits a model request body (OpenAI chat completions or
// completions, Anthropic messages) into what a ModelTurn keeps beside the
// conversation: the "tools" list exactly as sent and the remaining fields
// (sampling parameters and server extensions) without the conversation
// (messages, prompt, system; a Responses request's input and
// instructions), tools and model. A body that is not a JSON object
// yields neither.
func RequestParts(body []byte) (tools, params json.RawMessage) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil, nil
	}
	if t, ok := m["tools"]; ok && !bytes.Equal(bytes.TrimSpace(t), []byte("null")) {
		tools = append(json.RawMessage(nil), t...)
	}
	for _, k := range []string{"messages", "prompt", "system", "input", "instructions", "tools", "model"} {
		delete(m, k)
	}
	if len(m) > 0 {
		params, _ = json.Marshal(m) // keys sorted: the same parameters give the same bytes
	}
	return tools, params
}

// Served collects the token data a model server returned with a chat
// completion, from a whole response body or from the chunks of a stream
// (Add each chunk's data in order). Only choice 0 is read. It understands:
//
//   - vLLM: prompt_token_ids on the response (or on the choice),
//     choices[0].token_ids (return_token_ids), prompt_logprobs, and
//     "token_id:N" token strings (return_tokens_as_token_ids);
//   - OpenAI logprobs: choices[0].logprobs.content[] with token, logprob
//     and top_logprobs (chat), or tokens, token_logprobs and top_logprobs
//     (completions);
//   - SGLang meta_info (on the response or the choice):
//     input_token_logprobs and output_token_logprobs as [logprob, id,
//     text] triples, output_top_logprobs as lists of them.
//
// Nothing is re-tokenized: what was not served stays empty.
type Served struct {
	promptIDs   []int64
	promptLPs   json.RawMessage
	ids         []int64
	lps         []float64
	tokens      []string
	top         [][]TopLogprob
	anyTop      bool
	sgPrompt    []int64
	sgIDs       []int64
	sgLPs       []float64
	sgTokens    []string
	sgTop       [][]TopLogprob
	sgTokensAll bool // every SGLang output triple carried its text
}

type wireLogprob struct {
	Token       string  `json:"token"`
	Logprob     float64 `json:"logprob"`
	TopLogprobs []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
	} `json:"top_logprobs"`
}

type wireMeta struct {
	InputTokenLogprobs  []json.RawMessage   `json:"input_token_logprobs"`
	OutputTokenLogprobs []json.RawMessage   `json:"output_token_logprobs"`
	OutputTopLogprobs   [][]json.RawMessage `json:"output_top_logprobs"`
}

type wireChoice struct {
	Index          int     `json:"index"`
	TokenIDs       []int64 `json:"token_ids"`
	PromptTokenIDs []int64 `json:"prompt_token_ids"`
	Logprobs       *struct {
		Content []wireLogprob `json:"content"` // chat completions
		// Completions (/v1/completions): parallel lists.
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []*float64           `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	} `json:"logprobs"`
	MetaInfo *wireMeta `json:"meta_info"`
}

type wireBody struct {
	PromptTokenIDs []int64         `json:"prompt_token_ids"`
	PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
	MetaInfo       *wireMeta       `json:"meta_info"`
	Choices        []wireChoice    `json:"choices"`
}

// Add reads one response body or stream chunk. Bodies that are not JSON
// are ignored.
func (s *Served) Add(body []byte) {
	var b wireBody
	if json.Unmarshal(body, &b) != nil {
		return
	}
	if len(b.PromptTokenIDs) > 0 && s.promptIDs == nil {
		s.promptIDs = b.PromptTokenIDs
	}
	if len(b.PromptLogprobs) > 0 && !bytes.Equal(b.PromptLogprobs, []byte("null")) && s.promptLPs == nil {
		s.promptLPs = append(json.RawMessage(nil), b.PromptLogprobs...)
	}
	s.addMeta(b.MetaInfo)
	for _, ch := range b.Choices {
		if ch.Index != 0 {
			continue
		}
		if len(ch.PromptTokenIDs) > 0 && s.promptIDs == nil {
			s.promptIDs = ch.PromptTokenIDs
		}
		s.ids = append(s.ids, ch.TokenIDs...)
		if ch.Logprobs != nil {
			s.addCompletionLogprobs(ch.Logprobs.Tokens, ch.Logprobs.TokenLogprobs, ch.Logprobs.TopLogprobs)
			for _, c := range ch.Logprobs.Content {
				s.lps = append(s.lps, c.Logprob)
				s.tokens = append(s.tokens, c.Token)
				alts := make([]TopLogprob, 0, len(c.TopLogprobs))
				for _, t := range c.TopLogprobs {
					alts = append(alts, TopLogprob{Token: t.Token, Logprob: t.Logprob})
				}
				s.anyTop = s.anyTop || len(alts) > 0
				s.top = append(s.top, alts)
			}
		}
		s.addMeta(ch.MetaInfo)
	}
}

// addCompletionLogprobs reads the completions API's logprobs: tokens,
// token_logprobs and top_logprobs as {token: logprob} maps (their order
// is not kept by JSON objects: alternatives are sorted by logprob).
func (s *Served) addCompletionLogprobs(tokens []string, lps []*float64, top []map[string]float64) {
	for i, tok := range tokens {
		lp := 0.0
		if i < len(lps) && lps[i] != nil {
			lp = *lps[i]
		}
		s.lps = append(s.lps, lp)
		s.tokens = append(s.tokens, tok)
		var alts []TopLogprob
		if i < len(top) {
			for t, l := range top[i] {
				alts = append(alts, TopLogprob{Token: t, Logprob: l})
			}
			slices.SortFunc(alts, func(a, b TopLogprob) int {
				if c := cmp.Compare(b.Logprob, a.Logprob); c != 0 {
					return c
				}
				return strings.Compare(a.Token, b.Token)
			})
		}
		s.anyTop = s.anyTop || len(alts) > 0
		s.top = append(s.top, alts)
	}
}

func (s *Served) addMeta(m *wireMeta) {
	if m == nil {
		return
	}
	if len(m.OutputTokenLogprobs) > 0 && s.sgIDs == nil {
		s.sgTokensAll = true
	}
	for _, raw := range m.InputTokenLogprobs {
		if _, id, _, ok := triple(raw); ok {
			s.sgPrompt = append(s.sgPrompt, id)
		}
	}
	for _, raw := range m.OutputTokenLogprobs {
		lp, id, text, ok := triple(raw)
		if !ok {
			continue
		}
		s.sgIDs = append(s.sgIDs, id)
		s.sgLPs = append(s.sgLPs, lp)
		s.sgTokens = append(s.sgTokens, derefOr(text))
		s.sgTokensAll = s.sgTokensAll && text != nil
	}
	for _, pos := range m.OutputTopLogprobs {
		alts := make([]TopLogprob, 0, len(pos))
		for _, raw := range pos {
			if lp, id, text, ok := triple(raw); ok {
				alts = append(alts, TopLogprob{Token: derefOr(text), Logprob: lp, ID: &id})
			}
		}
		s.sgTop = append(s.sgTop, alts)
	}
}

// triple decodes SGLang's [logprob, token_id, text-or-null]. The first
// input token's logprob is null; it still names the token.
func triple(raw json.RawMessage) (lp float64, id int64, text *string, ok bool) {
	var t []json.RawMessage
	if json.Unmarshal(raw, &t) != nil || len(t) < 2 {
		return 0, 0, nil, false
	}
	if json.Unmarshal(t[1], &id) != nil {
		return 0, 0, nil, false
	}
	_ = json.Unmarshal(t[0], &lp) // null stays 0
	if len(t) > 2 {
		var s *string
		if json.Unmarshal(t[2], &s) == nil {
			text = s
		}
	}
	return lp, id, text, true
}

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Fill sets the turn's token fields from what was served. OpenAI-style
// logprobs win over SGLang's meta_info where both came; token ids come
// from token_ids, else SGLang's triples, else "token_id:N" strings.
func (s *Served) Fill(mt *ModelTurn) {
	mt.PromptTokenIDs = s.promptIDs
	if mt.PromptTokenIDs == nil && len(s.sgPrompt) > 0 {
		mt.PromptTokenIDs = s.sgPrompt
	}
	mt.PromptLogprobs = s.promptLPs
	mt.TokenIDs, mt.Logprobs, mt.Tokens, mt.TopLogprobs = s.ids, s.lps, s.tokens, nil
	if s.anyTop {
		mt.TopLogprobs = s.top
	}
	if len(mt.TokenIDs) == 0 && len(s.sgIDs) > 0 {
		mt.TokenIDs = s.sgIDs
	}
	if len(mt.Logprobs) == 0 && len(s.sgLPs) > 0 {
		mt.Logprobs = s.sgLPs
		if s.sgTokensAll {
			mt.Tokens = s.sgTokens
		}
		if len(s.sgTop) > 0 {
			mt.TopLogprobs = s.sgTop
		}
	}
	if len(mt.TokenIDs) == 0 {
		mt.TokenIDs = idsFromTokens(mt.Tokens)
	}
}

// idsFromTokens reads vLLM's return_tokens_as_token_ids rendering, where
// every token string is "token_id:N"; anything else yields none.
func idsFromTokens(tokens []string) []int64 {
	if len(tokens) == 0 {
		return nil
	}
	ids := make([]int64, len(tokens))
	for i, t := range tokens {
		v, ok := strings.CutPrefix(t, "token_id:")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return nil
		}
		ids[i] = n
	}
	return ids
}

// Token-id modes: how a model server is asked for token ids and logprobs
// (TokenFields). The default ("") is TokensVLLM: a server that refuses
// those fields with a 400 naming them is asked again without them (see
// RefusedFields) and its turns are marked TokensUnavailable.
const (
	TokensOff    = "off"
	TokensVLLM   = "vllm"   // return_token_ids (prompt and completion ids) and logprobs
	TokensSGLang = "sglang" // return_logprob from the first prompt token, with token texts
)

// TokenFields returns the request fields that ask a server of the given
// mode for token ids and logprobs: vLLM's for "" (the default), none for
// TokensOff.
func TokenFields(mode string) (map[string]json.RawMessage, error) {
	t := json.RawMessage("true")
	switch mode {
	case TokensOff:
		return nil, nil
	case "", TokensVLLM:
		return map[string]json.RawMessage{"return_token_ids": t, "logprobs": t}, nil
	case TokensSGLang:
		return map[string]json.RawMessage{"return_logprob": t, "logprob_start_len": json.RawMessage("0"), "return_text_in_logprobs": t}, nil
	}
	return nil, fmt.Errorf("token ids mode %q: use %s, %s or %s", mode, TokensVLLM, TokensSGLang, TokensOff)
}

// WithFields returns body (a JSON object) with fields added where the body
// does not set them already; a body that is not an object comes back as
// it was.
func WithFields(body []byte, fields map[string]json.RawMessage) []byte {
	b, _ := AddFields(body, fields)
	return b
}

// AddFields is WithFields that also says which fields it added (sorted).
func AddFields(body []byte, fields map[string]json.RawMessage) ([]byte, []string) {
	if len(fields) == 0 {
		return body, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return body, nil
	}
	var added []string
	for k, v := range fields {
		if _, set := m[k]; !set {
			m[k] = v
			added = append(added, k)
		}
	}
	if len(added) == 0 {
		return body, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return body, nil
	}
	slices.Sort(added)
	return b, added
}

// RefusedFields reports whether a model server's answer refuses fields
// the caller added to the request (a 400 whose body names one of them,
// as OpenAI's "Unrecognized request argument supplied: return_token_ids"
// does): the request should then go again as the client sent it. It
// returns the server's message, one line, for the warning and the
// turn's TokensUnavailable; "" when the answer is no such refusal.
func RefusedFields(status int, body []byte, added []string) string {
	if status != 400 || len(added) == 0 {
		return ""
	}
	for _, f := range added {
		if bytes.Contains(body, []byte(f)) {
			msg := string(body)
			var e struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
				Message string `json:"message"`
			}
			if json.Unmarshal(body, &e) == nil {
				msg = cmp.Or(e.Error.Message, e.Message, msg)
			}
			msg = strings.Join(strings.Fields(msg), " ")
			if len(msg) > 300 {
				msg = msg[:300] + "..."
			}
			return fmt.Sprintf("the model server refused %s (400: %s)", strings.Join(added, ", "), msg)
		}
	}
	return ""
}
