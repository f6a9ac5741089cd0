package toolcall

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// argTypes are the argument types the registry's schemas must describe.
var argTypes = map[string]any{
	Bash: BashArgs{}, ReadFile: ReadFileArgs{}, WriteFile: WriteFileArgs{},
	Edit: EditArgs{}, ListDir: ListDirArgs{}, Submit: SubmitArgs{},
}

// TestToolSchemas: every tool's schema names exactly its argument type's
// JSON fields, requires those without omitempty, admits no others, and
// the strict decoding that runs the call agrees (an unknown field is
// refused).
func TestToolSchemas(t *testing.T) {
	var names []string
	for _, tl := range Tools() {
		names = append(names, tl.Name)
		typ, ok := argTypes[tl.Name]
		if !ok {
			t.Errorf("tool %s has no argument type in this test", tl.Name)
			continue
		}
		var want struct {
			props    []string
			required []string
		}
		rt := reflect.TypeOf(typ)
		for i := range rt.NumField() {
			name, opts, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			want.props = append(want.props, name)
			if !strings.Contains(opts, "omitempty") {
				want.required = append(want.required, name)
			}
		}
		var got struct {
			Type                 string                     `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			Required             []string                   `json:"required"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
		}
		if err := json.Unmarshal(tl.Schema, &got); err != nil {
			t.Fatalf("%s: schema %s: %v", tl.Name, tl.Schema, err)
		}
		props := slices.Sorted(func(yield func(string) bool) {
			for k := range got.Properties {
				if !yield(k) {
					return
				}
			}
		})
		slices.Sort(want.props)
		if got.Type != "object" || !cmp.Equal(props, want.props) || !cmp.Equal(got.Required, want.required, cmpEmpty) ||
			got.AdditionalProperties == nil || *got.AdditionalProperties {
			t.Errorf("%s: schema %s; want properties %v, required %v, additionalProperties false", tl.Name, tl.Schema, want.props, want.required)
		}
		if tl.Description == "" {
			t.Errorf("%s: no description", tl.Name)
		}
		if reflect.TypeOf(NewArgs(tl.Name)) != reflect.PointerTo(rt) || !IsTool(tl.Name) {
			t.Errorf("%s: NewArgs gives %T, IsTool %v; want *%v, true", tl.Name, NewArgs(tl.Name), IsTool(tl.Name), rt)
		}
		if _, err := DecodeArgs(json.RawMessage(`{"no_such_field":1}`), NewArgs(tl.Name)); err == nil {
			t.Errorf("%s: an unknown field decoded; the schema says additionalProperties false", tl.Name)
		}
	}
	if d := cmp.Diff([]string{Bash, ReadFile, WriteFile, Edit, ListDir, Submit}, names); d != "" {
		t.Errorf("tools (-want +got):\n%s", d)
	}
	if got, want := ToolNames(), strings.Join(names, ", "); got != want {
		t.Errorf("ToolNames() = %q, want %q", got, want)
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })
