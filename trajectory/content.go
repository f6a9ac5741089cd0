package trajectory

import (
	"encoding/json"
	"strings"

	"github.com/rollcage/rollcage/internal/jsondec"
)

// ContentText flattens an OpenAI-style message content into a Message's
// Content: a JSON string as it is; an array of parts as its non-empty
// text parts joined by newlines, as vLLM joins them for the chat template
// (image and other parts carry no text); null or nothing as ""; any other
// JSON as its text. The recording proxy and the audit's readers both
// flatten with it, so a trajectory reads the same whoever wrote it.
func ContentText(raw []byte) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if raw[0] != '[' && json.Unmarshal(raw, &s) == nil { // a list is no string: one pass less
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	// the faster decoder: the audit flattens every message of a long
	// trajectory here
	if jsondec.Unmarshal(raw, &parts) == nil {
		// one text part (the common list) is its text, without a copy;
		// more are joined into one buffer of their joined size
		texts, size, last := 0, -1, ""
		for _, p := range parts {
			if p.Text != "" {
				texts, size, last = texts+1, size+1+len(p.Text), p.Text
			}
		}
		if texts <= 1 {
			return last
		}
		var b strings.Builder
		b.Grow(size)
		for _, p := range parts {
			if p.Text != "" {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return string(raw)
}
