package trajectory

import (
	"testing"
)

func TestContentText(t *testing.T) {
	tests := []struct {
		raw, want string
	}{
		{``, ""},
		{`null`, ""},
		{`""`, ""},
		{`"fix it"`, "fix it"},
		{`"a\nb \u00e9"`, "a\nb é"},
		{`[{"type":"text","text":"fix "},{"type":"text","text":"it"}]`, "fix \nit"},
		{`[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":""},{"type":"text","text":"b"}]`, "a\nb"},
		{`[{"type":"text","text":"only"}]`, "only"},
		{`[{"type":"image_url"},{"type":"text","text":""},{"type":"text","text":"last"}]`, "last"},
		{`[{"type":"text","text":"x"},{"type":"text","text":"yz"},{"type":"text","text":"\u00e9"}]`, "x\nyz\né"},
		{`[]`, ""},
		{`[1, 2]`, "[1, 2]"}, // not parts: as written
		{`{"command":"ls"}`, `{"command":"ls"}`},
		{`12.50`, "12.50"},
	}
	for _, tc := range tests {
		if got := ContentText([]byte(tc.raw)); got != tc.want {
			t.Errorf("ContentText(%s) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}
