package rollcage

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeClientExample keeps the README's Python example the one
// docs/python-client.md gives, which the client's Docker-backed test runs
// verbatim against a gateway.
func TestReadmeClientExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("docs/python-client.md")
	if err != nil {
		t.Fatal(err)
	}
	got, want := firstBlock(string(readme), "```python\n"), firstBlock(string(page), "```python\n")
	if want == "" {
		t.Fatal("docs/python-client.md has no ```python block")
	}
	if got != want {
		t.Errorf("README.md's Python example differs from docs/python-client.md's first one (the one CI runs); copy it over:\nREADME:\n%s\ndocs:\n%s", got, want)
	}
}

// firstBlock returns the body of the first fenced block opened by fence,
// or "" when there is none.
func firstBlock(s, fence string) string {
	i := strings.Index(s, fence)
	if i < 0 {
		return ""
	}
	s = s[i+len(fence):]
	j := strings.Index(s, "```")
	if j < 0 {
		return ""
	}
	return s[:j]
}
