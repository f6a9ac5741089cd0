package sandboxtest

import (
	"os"
	"os/exec"
	"testing"
)

// Chromium finds Debian's chromium for the tests that drive a headless
// browser (the dashboard's, the audit report's); like the other
// requirements here it fails the test under CI=true when it is missing
// and skips elsewhere.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	Unavailable(t, "chromium not found at /usr/bin/chromium: apt-get install -y chromium")
	return ""
}
