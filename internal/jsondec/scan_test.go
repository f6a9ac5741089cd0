package jsondec

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// validV1 is whether in is one JSON value as encoding/json's semantics
// accept it: invalid UTF-8 and duplicate names allowed.
func validV1(in string) bool {
	return jsontext.Value(in).IsValid(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
}

var skipInputs = []string{
	`0`, `-0`, `12`, `-12.5e+3`, `1E9`, `0.0`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x1`,
	`true`, `false`, `null`, `tru`, `nul`, `truex`, `True`,
	`""`, `"a"`, `"abcdefghijklmnopqrstuvwxyz"`, `"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00"`,
	`"\ud800"`, "\"bad \xff utf8 in a long enough run\"", `"\x"`, `"\u12"`, `"\u12g4"`, `"unterminated`,
	"\"tab\there\"", "\"nl\nhere, past eight bytes\"", "\"\x1f\"", "\"\x7f\"", `"\"`, `"a\\"`,
	`"0123456789abcdef\"0123456789abcdef"`, `"é日本語 and more text to fill words"`,
	`[]`, `[ ]`, `[1,2]`, `[1,]`, `[,1]`, `[1 2]`, `[`, `]`, `[[[]]]`, `[{"a":[1,{"b":null}]}]`,
	`{}`, `{ }`, `{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1,"a":2}`, `{"a":}`, `{"a":1 "b":2}`,
	`{"a":1}}`, `{"a":[1,2],"b":{"c":"d"}}`, " \t\n\r{\"a\" : [ 1 , 2 ] }\n", `{"\u0061":1}`,
	strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
}

// TestSkip: Skip reads exactly the values encoding/json accepts (up to
// maxDepth), to their end.
func TestSkip(t *testing.T) {
	for _, in := range skipInputs {
		trimmed := strings.TrimLeft(in, " \t\r\n")
		end, ok := Skip([]byte(trimmed), 0)
		if ok {
			ok = Space([]byte(trimmed), end) == len(trimmed)
		}
		if want := validV1(in); ok != want {
			t.Errorf("Skip(%q): read %v, want %v", in, ok, want)
		}
	}
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	if _, ok := Skip([]byte(deep), 0); ok {
		t.Errorf("Skip read %d levels, beyond maxDepth", maxDepth+1)
	}
}

// TestString: String decodes as the decoder decodes into a string, and
// reads no invalid string.
func TestString(t *testing.T) {
	for _, in := range skipInputs {
		if in == "" || in[0] != '"' {
			continue
		}
		got, end, ok := String([]byte(in), 0)
		if want := validV1(in); ok != want || ok && end != len(in) {
			t.Errorf("String(%q): read %v to %d, want %v to %d", in, ok, end, want, len(in))
			continue
		}
		if !ok {
			continue
		}
		want, _ := jsontext.AppendUnquote(nil, in)
		if got != string(want) {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestObjectArray: Object and Array walk members and elements in order
// and read to the end of the container.
func TestObjectArray(t *testing.T) {
	in := []byte(`{"a": [1, "x" ,null], "b\n":{}, "c":true}`)
	var names []string
	var elems []string
	end, ok := Object(in, 0, func(name []byte, v int) (int, bool) {
		names = append(names, string(name))
		if in[v] != '[' {
			return Skip(in, v)
		}
		return Array(in, v, func(e int) (int, bool) {
			end, ok := Skip(in, e)
			elems = append(elems, string(in[e:end]))
			return end, ok
		})
	})
	if !ok || end != len(in) {
		t.Fatalf("Object read %v to %d, want to %d", ok, end, len(in))
	}
	if got, want := strings.Join(names, "|"), `a|b\n|c`; got != want {
		t.Errorf("names %q, want %q", got, want)
	}
	if got, want := strings.Join(elems, "|"), `1|"x"|null`; got != want {
		t.Errorf("elements %q, want %q", got, want)
	}
	for _, bad := range []string{`{"a":1,}`, `{"a"}`, `{"a":`, `{"a":1`, `[1,]`, `[1`, `[`, `{`} {
		b := []byte(bad)
		if _, ok := Object(b, 0, func(_ []byte, v int) (int, bool) { return Skip(b, v) }); ok {
			t.Errorf("Object read %q", bad)
		}
		if _, ok := Array(b, 0, func(v int) (int, bool) { return Skip(b, v) }); ok {
			t.Errorf("Array read %q", bad)
		}
	}
}

// FuzzSkip: on any input, Skip and String read only valid JSON, and
// String decodes as the decoder does.
func FuzzSkip(f *testing.F) {
	for _, in := range skipInputs {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		end, ok := Skip([]byte(in), 0)
		if ok && !validV1(in[:end]) {
			t.Fatalf("Skip read %q, which is not JSON", in[:end])
		}
		shallow := strings.Count(in, "[")+strings.Count(in, "{") < maxDepth
		if !ok && shallow && len(in) > 0 && in[0] > ' ' && validV1(in) {
			t.Fatalf("Skip did not read %q, which is JSON", in)
		}
		if len(in) == 0 || in[0] != '"' {
			return
		}
		got, end, ok := String([]byte(in), 0)
		if !ok {
			return
		}
		if !validV1(in[:end]) {
			t.Fatalf("String read %q, which is not JSON", in[:end])
		}
		if want, _ := jsontext.AppendUnquote(nil, in[:end]); got != string(want) {
			t.Fatalf("String(%q) = %q, want %q", in[:end], got, want)
		}
	})
}
