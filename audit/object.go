package audit

import (
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
	json "github.com/go-json-experiment/json/v1"

	"github.com/rollcage/rollcage/internal/jsondec"
	"github.com/rollcage/rollcage/trajectory"
)

// object is a trajectory file holding one JSON object, read in one pass
// (scanObject): the two large members decoded (SWE-agent's steps, a
// message list), everything else kept raw by name for the format's
// reader.
//
// Splitting the file into raw members first and decoding each again
// scanned every byte twice, and a message's content a third time; most
// of these files are members no reader looks at (SWE-agent's per-step
// query, mini-swe-agent's per-message extra), which one pass skips once.
// Top-level names match as the raw split matched them: exactly.
type object struct {
	Trajectory []sweStep
	Messages   []message
	Rest       map[string]json.RawMessage // slices of the file, read only while it is parsed
}

// parseFast reads a file holding one JSON object in one pass. ok is
// false for anything but an episode read without a doubt: a file that is
// no single object or that scanObject does not read, an error of any
// format's reader, a message without a role, one rollcage event; the raw
// way then decides, with its errors. When ok, the episode is the one the
// raw way reads.
func parseFast(base, name string, data []byte) (Trace, bool) {
	o, ok := scanObject(data)
	if !ok {
		return Trace{}, false
	}
	var ep Trace
	var err error
	switch {
	case o.Trajectory != nil:
		ep, err = parseSWEAgent(base, name, o.Rest, o.Trajectory)
	case has(o.Rest, "history") && has(o.Rest, "instance_id"):
		ep, err = parseOpenHands(base, name, o.Rest)
	case o.Messages != nil:
		if slices.ContainsFunc(o.Messages, func(m message) bool { return m.Role == "" }) {
			return Trace{}, false
		}
		ep, err = parseMessageObject(base, name, o.Rest, o.Messages)
	default:
		return Trace{}, false
	}
	return ep, err == nil
}

// scanObject reads data, one JSON object, into an object with
// jsondec's scanner: the members no reader needs are skipped (checked
// as JSON, not decoded), strings are searched eight bytes at a time.
// It decodes steps and messages as encoding/json's semantics decode
// them into sweStep and message (the raw way), or reports ok false
// where it is not sure it would: invalid JSON, a name with an escape or
// outside ASCII where names are matched, a duplicate of a name it
// decodes, a name that matches one of them only as encoding/json
// matches (case, '_' and '-' aside), a value of another type than the
// field's.
//
// The other members are slices of data, which nothing keeps after
// parsing: the file is not kept alive by what is read from it.
func scanObject(data []byte) (object, bool) {
	o := object{Rest: map[string]json.RawMessage{}}
	var seenSteps, seenMsgs bool
	end, ok := jsondec.Object(data, 0, func(name []byte, v int) (int, bool) {
		if !plainName(name) {
			return v, false
		}
		switch string(name) {
		case "trajectory":
			if seenSteps {
				return v, false
			}
			seenSteps = true
			return scanSlice(data, v, &o.Trajectory, scanStep)
		case "messages":
			if seenMsgs {
				return v, false
			}
			seenMsgs = true
			return scanSlice(data, v, &o.Messages, scanMessage)
		}
		if _, dup := o.Rest[string(name)]; dup {
			return v, false
		}
		end, ok := jsondec.Skip(data, v)
		o.Rest[string(name)] = data[v:end:end]
		return end, ok
	})
	if !ok || jsondec.Space(data, end) != len(data) {
		return object{}, false
	}
	return o, true
}

// plainName: a name that means what it says, without escapes or bytes
// outside ASCII (which decoders may read otherwise).
func plainName(name []byte) bool {
	for _, c := range name {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// fields matches the names of one object against the fields a scan
// decodes: exact names are a field's index, names encoding/json would
// also match (another case, '_' or '-' dropped) or a field's second
// occurrence make the scan give up.
type fields struct {
	names  []string // exact, lower case
	folded []string // lower case without '_' and '-'
	seen   uint64
}

func newFields(names ...string) *fields {
	f := &fields{names: names}
	for _, n := range names {
		f.folded = append(f.folded, strings.NewReplacer("_", "", "-", "").Replace(n))
	}
	return f
}

// match is name's field (-1: none) with ok false where the scan must
// give up; reset before each object.
func (f *fields) match(name []byte) (int, bool) {
	if !plainName(name) {
		return -1, false
	}
	for i, n := range f.names {
		if string(name) == n {
			if f.seen&(1<<i) != 0 {
				return i, false
			}
			f.seen |= 1 << i
			return i, true
		}
	}
	var buf [32]byte
	folded := buf[:0]
	for _, c := range name {
		switch {
		case c == '_' || c == '-':
		case 'A' <= c && c <= 'Z':
			folded = append(folded, c+'a'-'A')
		default:
			folded = append(folded, c)
		}
	}
	if slices.Contains(f.folded, string(folded)) {
		return -1, false
	}
	return -1, true
}

// scanSlice reads null (leaving *dst nil) or an array whose elements
// (null: the zero element) scan reads.
func scanSlice[T any](data []byte, v int, dst *[]T, scan func([]byte, int, *T) (int, bool)) (int, bool) {
	if data[v] == 'n' {
		return jsondec.Skip(data, v)
	}
	out := []T{}
	end, ok := jsondec.Array(data, v, func(e int) (int, bool) {
		out = append(out, *new(T))
		if data[e] == 'n' {
			return jsondec.Skip(data, e)
		}
		return scan(data, e, &out[len(out)-1])
	})
	*dst = out
	return end, ok
}

// scanString reads a string into *dst; null leaves it as it is.
func scanString(data []byte, v int, dst *string) (int, bool) {
	switch data[v] {
	case '"':
		s, end, ok := jsondec.String(data, v)
		*dst = s
		return end, ok
	case 'n':
		return jsondec.Skip(data, v)
	}
	return v, false
}

// scanFields reads the object at v, calling field with the index of each
// member of f's (and its value's index), skipping the others.
func scanFields(data []byte, v int, f fields, field func(i, v int) (int, bool)) (int, bool) {
	return jsondec.Object(data, v, func(name []byte, v int) (int, bool) {
		i, ok := f.match(name)
		switch {
		case !ok:
			return v, false
		case i < 0:
			return jsondec.Skip(data, v)
		}
		return field(i, v)
	})
}

var stepFields = newFields("action", "observation", "state")

func scanStep(data []byte, v int, s *sweStep) (int, bool) {
	return scanFields(data, v, *stepFields, func(i, v int) (int, bool) {
		switch i {
		case 0:
			return scanString(data, v, &s.Action)
		case 1:
			return scanString(data, v, &s.Observation)
		case 2:
			end, ok := jsondec.Skip(data, v)
			s.State = data[v:end:end]
			return end, ok
		}
		return v, false // no other field
	})
}

var messageFields = newFields("role", "content", "tool_calls", "tool_call_id", "name", "function_call")

func scanMessage(data []byte, v int, m *message) (int, bool) {
	return scanFields(data, v, *messageFields, func(i, v int) (int, bool) {
		switch i {
		case 0:
			return scanString(data, v, &m.Role)
		case 1:
			if data[v] == '"' {
				s, end, ok := jsondec.String(data, v)
				m.Content = flatText(s)
				return end, ok
			}
			text, end, ok := scanContent(data, v)
			m.Content = text
			return end, ok
		case 2:
			return scanSlice(data, v, &m.ToolCalls, scanToolCall)
		case 3:
			return scanString(data, v, &m.ToolCallID)
		case 4:
			return scanString(data, v, &m.Name)
		case 5:
			if data[v] == 'n' {
				return jsondec.Skip(data, v)
			}
			m.FuncCall = new(function)
			return scanFunction(data, v, m.FuncCall)
		}
		return v, false // no other field
	})
}

var partFields = newFields("type", "text")

// scanContent reads a content that is no string as
// trajectory.ContentText flattens it. A list of parts is scanned in
// place, its non-empty texts joined by newlines; anything else, or a list
// the scan is unsure of, is skipped and given to ContentText.
func scanContent(data []byte, v int) (flatText, int, bool) {
	if data[v] == '[' {
		var texts []string
		end, ok := jsondec.Array(data, v, func(e int) (int, bool) {
			if data[e] == 'n' {
				return jsondec.Skip(data, e)
			}
			var typ, text string
			end, ok := scanFields(data, e, *partFields, func(i, v int) (int, bool) {
				if i == 0 {
					return scanString(data, v, &typ)
				}
				return scanString(data, v, &text)
			})
			if text != "" {
				texts = append(texts, text)
			}
			return end, ok
		})
		if ok {
			return flatText(strings.Join(texts, "\n")), end, true
		}
	}
	end, ok := jsondec.Skip(data, v)
	return flatText(trajectory.ContentText(data[v:end])), end, ok
}

var toolCallFields = newFields("id", "function")

func scanToolCall(data []byte, v int, tc *toolCall) (int, bool) {
	return scanFields(data, v, *toolCallFields, func(i, v int) (int, bool) {
		switch i {
		case 0:
			return scanString(data, v, &tc.ID)
		case 1:
			if data[v] == 'n' {
				return jsondec.Skip(data, v)
			}
			return scanFunction(data, v, &tc.Function)
		}
		return v, false // no other field
	})
}

var functionFields = newFields("name", "arguments")

func scanFunction(data []byte, v int, fn *function) (int, bool) {
	return scanFields(data, v, *functionFields, func(i, v int) (int, bool) {
		switch i {
		case 0:
			return scanString(data, v, &fn.Name)
		case 1:
			switch data[v] {
			case '"':
				s, end, ok := jsondec.String(data, v)
				fn.Arguments = argText(s)
				return end, ok
			case 'n':
				fn.Arguments = ""
				return jsondec.Skip(data, v)
			}
			end, ok := jsondec.Skip(data, v)
			fn.Arguments = argText(data[v:end])
			return end, ok
		}
		return v, false // no other field
	})
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
