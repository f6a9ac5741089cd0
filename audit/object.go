package audit

import (
	"bytes"
	"fmt"
	"unicode/utf8"
	"unsafe"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	json "github.com/go-json-experiment/json/v1"

	"github.com/rollcage/rollcage/trajectory"
)

// object is one JSON object of a trajectory (a file holding one, or a
// JSONL line) read token by token (readObject): the two large members
// decoded as they are read (SWE-agent's steps, a message list),
// everything else kept raw by name for the format's reader. Top-level
// names match exactly, the last of duplicates counting, as a split into
// raw members matches them.
type object struct {
	Trajectory []sweStep
	Messages   []message
	// badMessage is the index of the first element of "messages" that is
	// no chat message with a role (-1: none).
	badMessage int
	Rest       map[string]json.RawMessage // copies: nothing of the input is kept
	names      map[string]bool            // every member's
}

// decodeOpts are the decoder's options: encoding/json's semantics (names
// matched case-insensitively, invalid UTF-8 replaced, the last of
// duplicate names kept) on go-json-experiment's decoder, which reads
// these long trajectories in about half of encoding/json's CPU time.
var decodeOpts = json.DefaultOptionsV1()

// elementOpts decode one element of a list in place: encoding/json's
// semantics, without its error reporting's check of the whole value
// before decoding it (which reads every element twice). An element that
// fails ends the file's reading anyway.
var elementOpts = jsonv2.JoinOptions(decodeOpts, json.ReportErrorsWithLegacySemantics(false))

// has is whether obj has member k, other than null.
//
// (Decoded members are not in Rest; an object split into raw members
// alone, which the readers decode themselves, has them there.)
func (o object) has(k string) bool {
	switch {
	case k == "trajectory" && o.Trajectory != nil, k == "messages" && o.Messages != nil:
		return true
	}
	return has(o.Rest, k)
}

// readObject reads the JSON object dec is at, token by token.
func readObject(dec *jsontext.Decoder) (object, error) {
	o := object{Rest: map[string]json.RawMessage{}, names: map[string]bool{}, badMessage: -1}
	if tok, err := dec.ReadToken(); err != nil {
		return o, err
	} else if tok.Kind() != '{' {
		return o, fmt.Errorf("a JSON %s, not an object", kindName(tok.Kind()))
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return o, err
		}
		name := tok.String()
		o.names[name] = true
		list := dec.PeekKind() == '[' || dec.PeekKind() == 'n'
		switch {
		case name == "trajectory" && list:
			delete(o.Rest, name)
			if o.Trajectory, err = readList[sweStep](dec, nil); err != nil {
				return o, fmt.Errorf("\"trajectory\" is not a list of {action, observation} steps: %w", err)
			}
		case name == "messages" && list:
			delete(o.Rest, name)
			o.badMessage = -1
			o.Messages, err = readList(dec, func(i int, m *message) {
				if m.Role == "" && o.badMessage < 0 {
					o.badMessage = i
				}
			})
			if err != nil {
				return o, fmt.Errorf("\"messages\" is not a list of messages: %w", err)
			}
		default:
			// anything else, and a list member that is not one, kept raw
			// for the format's reader
			switch name {
			case "trajectory":
				o.Trajectory = nil
			case "messages":
				o.Messages, o.badMessage = nil, -1
			}
			raw, err := dec.ReadValue()
			if err != nil {
				return o, err
			}
			o.Rest[name] = bytes.Clone(raw)
		}
	}
	_, err := dec.ReadToken()
	return o, err
}

// readList reads null (nil) or a JSON array, decoding its elements as
// they are read; check sees each.
func readList[T any](dec *jsontext.Decoder, check func(int, *T)) ([]T, error) {
	switch k := dec.PeekKind(); k {
	case 'n':
		_, err := dec.ReadToken()
		return nil, err
	case '[':
	default:
		if k == 0 {
			_, err := dec.ReadToken()
			return nil, err
		}
		return nil, fmt.Errorf("a JSON %s where a list belongs", kindName(k))
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	out := []T{}
	for dec.PeekKind() != ']' {
		var v T
		if err := jsonv2.UnmarshalDecode(dec, &v, elementOpts); err != nil {
			return nil, fmt.Errorf("element %d: %w", len(out), err)
		}
		if check != nil {
			check(len(out), &v)
		}
		out = append(out, v)
	}
	_, err := dec.ReadToken()
	return out, err
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '[':
		return "array"
	case '{':
		return "object"
	}
	return "value"
}

// skip is a member no reader needs, read past as one value and dropped:
// jsontext scans a value it reads whole several times faster than it
// skips one token by token, as a decoder skips a member it does not know.
type skip struct{}

func (*skip) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	_, err := dec.ReadValue()
	return err
}

// flatText is a message's content flattened while it is decoded: a JSON
// string as is (one pass, the common case), anything else as text makes
// of it.
type flatText string

func (t *flatText) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	kind := dec.PeekKind()
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	if kind == '"' {
		*t = flatText(stringOf(raw))
		return nil
	}
	*t = flatText(trajectory.ContentText(raw))
	return nil
}

// stringOf is the string raw, a JSON string the decoder has read (so
// valid), as decoding it into a string reads it: invalid UTF-8 replaced
// (encoding/json's semantics). It allocates once, where decoding into a
// string unquotes into one buffer and copies that into the string: most
// of a trajectory's bytes are message contents and arguments, each
// unquoted here. One without escapes, valid UTF-8, is its text as it is
// (bytes.IndexByte and utf8.Valid read it many bytes at a time).
func stringOf(raw jsontext.Value) string {
	if body := raw[1 : len(raw)-1]; bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body)
	}
	b, _ := jsontext.AppendUnquote(make([]byte, 0, len(raw)), raw) // the only error is invalid UTF-8, replaced
	return unsafe.String(unsafe.SliceData(b), len(b))              // b is never written again
}

// argText is a tool call's arguments: a JSON string decoded, anything
// else (an object, from some writers) as written.
type argText string

func (t *argText) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case '"':
		raw, err := dec.ReadValue()
		if err != nil {
			return err
		}
		*t = argText(stringOf(raw))
		return nil
	case 'n':
		_, err := dec.ReadToken()
		*t = ""
		return err
	}
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	*t = argText(raw)
	return nil
}
