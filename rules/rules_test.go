package rules

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestDefaultBundleRegoTests(t *testing.T) {
	var out bytes.Buffer
	passed, failed, err := RunTests(context.Background(), nil, &out, false)
	if err != nil {
		t.Fatal(err)
	}
	if failed > 0 || passed == 0 {
		t.Errorf("rego tests: %d passed, %d failed\n%s", passed, failed, out.String())
	}
	t.Logf("%d rego tests passed", passed)
}

// TestUserPolicyRegoTests runs the test user policies' own Rego tests
// (rule caught, look-alike let through) beside the bundle's. Every test
// must pass: the bundle's benign tests count only their own package's
// flags, so team.editable flagging `pip install -e .` fails none of them.
func TestUserPolicyRegoTests(t *testing.T) {
	for _, dir := range []string{"testdata/user", "testdata/ungated"} {
		var out bytes.Buffer
		_, failed, err := RunTests(context.Background(), []string{dir}, &out, true)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if failed > 0 {
			t.Errorf("%s: %d Rego tests failed beside the user policy", dir, failed)
		}
		ran := 0
		for _, line := range strings.Split(out.String(), "\n") {
			if !strings.HasPrefix(line, "data.rollcage.rules.team_") {
				continue
			}
			ran++
			if !strings.Contains(line, ": PASS") {
				t.Errorf("%s: %s", dir, line)
			}
		}
		if ran == 0 {
			t.Errorf("%s: no user test ran\n%s", dir, out.String())
		}
	}
}
