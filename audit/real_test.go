package audit

import (
	"os"
	"path/filepath"
	"testing"
)

// realCorpusDir is the real third-party corpus beside the repository
// (../shared/corpus/real from the repository root). It is data, never
// committed: outside CI a test skips when it is absent, in CI it fails.
func realCorpusDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "shared", "corpus", "real")
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST.jsonl")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("real corpus missing at %s (CI has shared/ beside the clone): %v", dir, err)
		}
		t.Skipf("real corpus not at %s: %v", dir, err)
	}
	return dir
}

// TestRealCorpusReads: every file of the real corpus reads, in every
// format, and each record of a multi-run file is its own episode.
func TestRealCorpusReads(t *testing.T) {
	dir := realCorpusDir(t)
	eps, skipped := Read(dir)
	for _, s := range skipped {
		if filepath.Base(s.Path) != "MANIFEST.jsonl" {
			t.Errorf("skipped: %v", s)
		}
	}
	formats := map[string]int{}
	for _, e := range eps {
		formats[e.Format]++
		if len(e.Steps) == 0 {
			t.Errorf("%s: no steps", e.Source)
		}
	}
	// 139 files, one of them holding 3 runs
	if len(eps) != 141 {
		t.Errorf("%d episodes, want 141 (formats %v)", len(eps), formats)
	}
	for _, f := range []string{FormatOpenAI, FormatMiniSWE, FormatSWEAgent, FormatOpenHands} {
		if formats[f] == 0 {
			t.Errorf("no episode in format %s: %v", f, formats)
		}
	}
}
