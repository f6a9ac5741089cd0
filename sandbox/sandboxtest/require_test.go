package sandboxtest

import (
	"flag"
	"fmt"
	"strconv"
	"testing"
)

// TestSkipShort: -short skips an engine-backed test outside CI only; under
// CI=true a missing engine must fail, so nothing is skipped there.
func TestSkipShort(t *testing.T) {
	tests := []struct {
		short bool
		ci    string
		skip  bool
	}{
		{short: false, ci: "", skip: false},
		{short: true, ci: "", skip: true},
		{short: true, ci: "false", skip: true},
		{short: true, ci: "true", skip: false},
		{short: false, ci: "true", skip: false},
	}
	was := testing.Short()
	t.Cleanup(func() { flag.Set("test.short", strconv.FormatBool(was)) })
	for _, tc := range tests {
		if err := flag.Set("test.short", strconv.FormatBool(tc.short)); err != nil {
			t.Fatal(err)
		}
		t.Setenv("CI", tc.ci)
		var skipped bool
		t.Run(fmt.Sprintf("short=%v,CI=%q", tc.short, tc.ci), func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			SkipShort(t, "an engine")
		})
		if skipped != tc.skip {
			t.Errorf("short=%v CI=%q: skipped %v, want %v", tc.short, tc.ci, skipped, tc.skip)
		}
	}
}
