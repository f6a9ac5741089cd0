package audit

import (
	"slices"
	"unsafe"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	json "github.com/go-json-experiment/json/v1"

	"github.com/rollcage/rollcage/trajectory"
)

// object is a trajectory file holding one JSON object, decoded in one
// typed pass: the two large members typed (SWE-agent's steps, a message
// list), everything else kept raw by name for the format's reader.
//
// Splitting the file into raw members first and decoding each again
// scanned every byte twice, and a message's content a third time; most
// of these files are members no reader looks at (SWE-agent's per-step
// query, mini-swe-agent's per-message extra), which a typed pass skips
// once. Names match as the raw split did: exactly (case:strict).
type object struct {
	Trajectory []sweStep                  `json:"trajectory,case:strict"`
	Messages   []message                  `json:"messages,case:strict"`
	Rest       map[string]json.RawMessage `json:",unknown"`
}

// fastOptions are encoding/json's semantics, as everywhere in the
// readers, but with duplicate names an error: which duplicate wins in a
// typed member is not what the raw split decided, so such a file goes
// the raw way.
var fastOptions = jsonv2.JoinOptions(json.DefaultOptionsV1(), jsontext.AllowDuplicateNames(false))

// parseFast reads a file holding one JSON object in one typed pass. ok is
// false for anything but an episode read without a doubt: a file that is
// no single object, an error of any format's reader, a message without a
// role, one rollcage event; the raw way then decides, with its errors.
// When ok, the episode is the one the raw way reads.
func parseFast(base, name string, data []byte) (Episode, bool) {
	var o object
	if jsonv2.Unmarshal(data, &o, fastOptions) != nil {
		return Episode{}, false
	}
	var ep Episode
	var err error
	switch {
	case o.Trajectory != nil:
		ep, err = parseSWEAgent(base, name, o.Rest, o.Trajectory)
	case has(o.Rest, "history") && has(o.Rest, "instance_id"):
		ep, err = parseOpenHands(base, name, o.Rest)
	case o.Messages != nil:
		if slices.ContainsFunc(o.Messages, func(m message) bool { return m.Role == "" }) {
			return Episode{}, false
		}
		ep, err = parseMessageObject(base, name, o.Rest, o.Messages)
	default:
		return Episode{}, false
	}
	return ep, err == nil
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
// unquoted here.
func stringOf(raw jsontext.Value) string {
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
