package rules

import (
	"bytes"
	"context"
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
