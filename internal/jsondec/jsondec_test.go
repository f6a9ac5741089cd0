package jsondec

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestUnmarshalAsEncodingJSON: on inputs where decoders are known to part,
// Unmarshal leaves the value and error encoding/json leaves.
func TestUnmarshalAsEncodingJSON(t *testing.T) {
	inputs := []string{
		`{"a":"x"}`, `{"A":"x"}`, `{"a":"x","A":"y"}`, "{\"a\":\"\xff\"}",
		`{"a":"\ud800"}`, `{"a":null}`, `{"a":1}`, `{"a":"x"`, `[]`, `null`, ``,
		`{"a":"x","b":[1,2]}`, `{"a":"x"} {}`,
	}
	type T struct {
		A string
		B []int
	}
	for _, in := range inputs {
		var got, want T
		gerr := Unmarshal([]byte(in), &got)
		werr := json.Unmarshal([]byte(in), &want)
		if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %+v, %v; encoding/json %+v, %v", in, got, gerr, want, werr)
		}
	}
}
