package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// NewArgs returns a pointer to a new zero value of tool's argument type
// (a *BashArgs for Bash, ...), or nil when tool is none of rollcage's own
// (a generic tool, whose arguments are plain JSON).
func NewArgs(tool string) any {
	switch tool {
	case Bash:
		return new(BashArgs)
	case ReadFile:
		return new(ReadFileArgs)
	case WriteFile:
		return new(WriteFileArgs)
	case Edit:
		return new(EditArgs)
	case ListDir:
		return new(ListDirArgs)
	case Submit:
		return new(SubmitArgs)
	}
	return nil
}

// IsTool reports whether name is one of rollcage's own tools (Bash, ...,
// Submit): one whose arguments have a type of their own.
func IsTool(name string) bool {
	switch name {
	case Bash, ReadFile, WriteFile, Edit, ListDir, Submit:
		return true
	}
	return false
}

// DecodeArgs decodes a tool's JSON arguments into args (a pointer, as
// NewArgs gives), strictly: unknown fields are refused, so a misspelt
// argument is reported instead of silently ignored, and so is text after
// the object, which json.Unmarshal would refuse too. Empty raw is {}.
// read reports whether args holds the arguments as json.Unmarshal would
// have decoded them (no error, or only an unknown field: encoding/json
// reads on past one and fills every known field), so the rules see a
// refused call's arguments without a second decode.
func DecodeArgs(raw json.RawMessage, args any) (read bool, err error) {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	// go-json-experiment's decoder with encoding/json's semantics first:
	// it decodes a call in about half the time (every replayed call is
	// decoded here), and what it accepts it reads as encoding/json does.
	// What it rejects encoding/json decodes again from the zero value,
	// for the same partial value, read flag and words as ever.
	if jsonv2.Unmarshal(raw, args, strictOptions) == nil {
		return true, nil
	}
	reflect.ValueOf(args).Elem().SetZero()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(args); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return false, ErrNoArgs // json.Unmarshal's words for it
		}
		return strings.HasPrefix(err.Error(), "json: unknown field "), err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return false, errors.New("invalid character after the arguments' JSON object")
	}
	return true, nil
}

// strictOptions are encoding/json's semantics with unknown fields an
// error, as a Decoder with DisallowUnknownFields reads.
var strictOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.RejectUnknownMembers(true))

// ErrNoArgs is a call's arguments ending before their JSON object does.
var ErrNoArgs = errors.New("unexpected end of JSON input")
