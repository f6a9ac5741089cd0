package toolcall

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestStrictArgsAsEncodingJSON: DecodeArgs decodes with go-json-experiment
// first; on the inputs where decoders are known to part (case, duplicate
// names, invalid UTF-8 and surrogates, null, escapes, numbers) it reads
// what encoding/json's strict Decoder reads, and refuses what it refuses.
func TestStrictArgsAsEncodingJSON(t *testing.T) {
	inputs := []string{
		`{"command":"ls"}`, `{"COMMAND":"ls"}`, `{"Command":"a","command":"b"}`,
		`{"command":"a\u00e9\ud800b"}`, "{\"command\":\"a\xffb\"}", `{"command":null}`,
		`{"command":"<&>\n\t\"\\\/"}`, `{"command":"x","timeout_sec":1e2}`, `{"command":"x","timeout_sec":-0.5}`,
		`{"comm_and":"x"}`, `{"command":"x","extra":1}`, `{"command":1}`, `{"command":"x"} `, `{"command":"x"}{}`,
		`[]`, `null`, `{}`, ``, `{"command":"x"`,
	}
	for _, in := range inputs {
		var got BashArgs
		read, err := DecodeArgs(json.RawMessage(in), &got)
		var want BashArgs
		raw := in
		if raw == "" {
			raw = "{}"
		}
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		werr := dec.Decode(&want)
		if werr == nil {
			if _, terr := dec.Token(); terr != io.EOF {
				werr = errTrailing // text after the object
			}
		}
		if (err == nil) != (werr == nil) || got != want {
			t.Errorf("DecodeArgs(%q) = %+v, %v (read %v); encoding/json: %+v, %v", in, got, err, read, want, werr)
		}
	}
}

var errTrailing = errors.New("text after the object")
