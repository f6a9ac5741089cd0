package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseE2BKeys(t *testing.T) {
	const k1, k2 = "e2b_0123456789abcdef0123456789abcdef01234567", "e2b_00000000000000000000000000000000000000ff"
	tests := []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{"", map[string]string{}, ""},
		{k1, map[string]string{k1: "client-1"}, ""},
		{"trainer=" + k1 + ", eval=" + k2, map[string]string{k1: "trainer", k2: "eval"}, ""},
		{"e2b_xxx", nil, `"e2b_xxx" is not e2b_ followed by 40 lowercase hex digits`},
		{"trainer=" + strings.ToUpper(k1), nil, "is not e2b_ followed by 40 lowercase hex digits"},
	}
	for _, tc := range tests {
		got, err := parseE2BKeys(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseE2BKeys(%q): error %v, want one saying %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseE2BKeys(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parseE2BKeys(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}
