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
// (rule caught, look-alike let through). The bundle's benign tests that
// count every flag may fail beside a user rule that flags their input
// (team.editable flags pip install -e): only the user packages' results
// are held here.
func TestUserPolicyRegoTests(t *testing.T) {
	for _, dir := range []string{"testdata/user", "testdata/ungated"} {
		var out bytes.Buffer
		if _, _, err := RunTests(context.Background(), []string{dir}, &out, true); err != nil {
			t.Fatalf("%s: %v", dir, err)
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
