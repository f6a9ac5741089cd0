package realcorpus

import (
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Dir is the corpus seen from a package one level below the repository
// root.
var Dir = filepath.Join("..", "..", "shared", "corpus", "real")

// Need returns Dir for a test that cannot go on without the corpus: it
// fails t under CI=true when the corpus (its MANIFEST.jsonl) is absent
// and skips it elsewhere.
func Need(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(Dir, "MANIFEST.jsonl")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("real corpus missing at %s (CI has shared/ beside the clone): %v", Dir, err)
		}
		t.Skipf("real corpus not at %s: %v", Dir, err)
	}
	return Dir
}

// With is dirs and, when it is present, the corpus: for a test that
// runs on its own data and on the corpus too. Under CI=true an absent
// corpus fails t (Need).
func With(t testing.TB, dirs ...string) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(Dir, "MANIFEST.jsonl")); err == nil || os.Getenv("CI") == "true" {
		dirs = append(dirs, Need(t))
	}
	return dirs
}

// Files returns the corpus's .json, .jsonl and .traj files in path order.
// When the corpus is absent it fails t under CI=true and elsewhere logs
// that its texts are left out and returns none.
func Files(t testing.TB) []string {
	t.Helper()
	if _, err := os.Stat(Dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("real corpus missing at %s: %v", Dir, err)
		}
		t.Logf("real corpus not at %s; its texts are left out", Dir)
		return nil
	}
	var files []string
	err := filepath.WalkDir(Dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".jsonl") || strings.HasSuffix(p, ".traj")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// FileStrings is Strings of the JSON document in file p. A file that
// does not decode as one JSON value (a JSON Lines file of several
// records) has none; one that cannot be read fails t.
func FileStrings(t testing.TB, p string, min int, nested bool) []string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	return Strings(v, min, nested)
}

// Strings returns the strings of a decoded JSON value at least min bytes
// long, an object's members in key order; with nested, a string holding
// a JSON object is walked too (after itself).
func Strings(v any, min int, nested bool) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if len(x) >= min {
				out = append(out, x)
			}
			var inner any
			if nested && strings.HasPrefix(x, "{") && json.Unmarshal([]byte(x), &inner) == nil {
				walk(inner)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x[k])
			}
		}
	}
	walk(v)
	return out
}
