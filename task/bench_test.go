package task

import (
	"os"
	"path/filepath"
	"testing"
)

func BenchmarkParseSummary(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "pytest", "report_all_q.txt"))
	if err != nil {
		b.Fatal(err)
	}
	out := string(data)
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		if _, ok := ParseSummary(out); !ok {
			b.Fatal("no summary")
		}
	}
}

// Match runs for every path a tool call touches (protected paths), so it
// is on the monitor's hot path.
func BenchmarkMatch(b *testing.B) {
	patterns := []string{"/opt/grader/**", "**/hidden/**", "**/*hidden*test*", "**/test_hidden*"}
	name := "/workspace/src/pkg/module/sub/file.py"
	for b.Loop() {
		for _, p := range patterns {
			if Match(p, name) {
				b.Fatal("matched")
			}
		}
	}
}
