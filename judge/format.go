package judge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// formatMode is how the server is asked for JSON; the client steps down
// from the strictest mode the first time a server rejects it.
type formatMode int32

const (
	modeJSONSchema formatMode = iota // response_format json_schema, strict
	modeJSONObject                   // response_format json_object
	modeProse                        // no response_format; extract the object from the text
)

func (m formatMode) String() string {
	switch m {
	case modeJSONSchema:
		return "json_schema"
	case modeJSONObject:
		return "json_object"
	default:
		return "prose"
	}
}

// verdictSchema is the strict JSON schema of one sample.
var verdictSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "hack": {"type": "boolean"},
    "category": {"type": "string"},
    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    "rationale": {"type": "string"}
  },
  "required": ["hack", "category", "confidence", "rationale"],
  "additionalProperties": false
}`)

func (m formatMode) responseFormat() *openai.ChatCompletionResponseFormat {
	switch m {
	case modeJSONSchema:
		return &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name:   "verdict",
				Schema: verdictSchema,
				Strict: true,
			},
		}
	case modeJSONObject:
		return &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	default:
		return nil
	}
}

// sample is one parsed answer of the model.
type sample struct {
	Hack       bool
	Category   string
	Confidence float64
	Rationale  string
}

var errMalformed = errors.New("malformed verdict")

// parseSample extracts and checks a verdict from the model's content. It
// accepts the object alone, in a code fence or inside prose: the first
// balanced JSON object is taken. Every field is required and confidence
// must lie in [0, 1].
func parseSample(content string) (sample, error) {
	obj, ok := firstObject(content)
	if !ok {
		return sample{}, fmt.Errorf("%w: no JSON object in %q", errMalformed, clip(content, 120))
	}
	var raw struct {
		Hack       *bool    `json:"hack"`
		Category   *string  `json:"category"`
		Confidence *float64 `json:"confidence"`
		Rationale  *string  `json:"rationale"`
	}
	if err := json.Unmarshal([]byte(obj), &raw); err != nil {
		return sample{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	switch {
	case raw.Hack == nil:
		return sample{}, fmt.Errorf("%w: field hack missing", errMalformed)
	case raw.Confidence == nil:
		return sample{}, fmt.Errorf("%w: field confidence missing", errMalformed)
	case math.IsNaN(*raw.Confidence) || *raw.Confidence < 0 || *raw.Confidence > 1:
		return sample{}, fmt.Errorf("%w: confidence %g outside [0, 1]", errMalformed, *raw.Confidence)
	case raw.Category == nil:
		return sample{}, fmt.Errorf("%w: field category missing", errMalformed)
	case raw.Rationale == nil:
		return sample{}, fmt.Errorf("%w: field rationale missing", errMalformed)
	}
	s := sample{Hack: *raw.Hack, Category: strings.TrimSpace(*raw.Category), Confidence: *raw.Confidence, Rationale: strings.TrimSpace(*raw.Rationale)}
	if s.Hack && (s.Category == "" || strings.EqualFold(s.Category, "none")) {
		return sample{}, fmt.Errorf("%w: hack without a category", errMalformed)
	}
	if !s.Hack {
		s.Category = ""
	}
	return s, nil
}

// firstObject returns the first balanced {...} in s that is valid JSON
// and has a "hack" key, skipping braces inside JSON strings; failing
// that, the first valid object, so the caller can say what is missing.
// Models like to quote examples or code before their answer.
func firstObject(s string) (string, bool) {
	first := ""
	for start := strings.IndexByte(s, '{'); start >= 0; {
		if end := balancedEnd(s, start); end > 0 {
			if cand := s[start:end]; json.Valid([]byte(cand)) {
				var probe map[string]json.RawMessage
				if json.Unmarshal([]byte(cand), &probe) == nil {
					if _, ok := probe["hack"]; ok {
						return cand, true
					}
				}
				if first == "" {
					first = cand
				}
			}
		}
		next := strings.IndexByte(s[start+1:], '{')
		if next < 0 {
			break
		}
		start += 1 + next
	}
	return first, first != ""
}

// balancedEnd returns the index after the brace closing the one at
// start, or -1.
func balancedEnd(s string, start int) int {
	depth, inStr, esc := 0, false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// rejectsFormat reports whether a 400 body says the server does not
// support the requested response_format.
func rejectsFormat(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "response_format") || strings.Contains(m, "json_schema") ||
		strings.Contains(m, "response format") || strings.Contains(m, "json_object")
}

func clip(s string, n int) string {
	s = string(bytes.ToValidUTF8([]byte(s), nil))
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
