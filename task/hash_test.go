package task

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
)

// hostShell is a fake sandbox whose Exec runs on the host with bash, so
// HashFiles' find/sha256sum pipeline is really run.
func hostShell() *fake.Sandbox {
	return fake.New(sandbox.Spec{EpisodeID: "hash-test"}, func(ctx context.Context, _ *fake.Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		out, err := exec.CommandContext(ctx, "bash", "-c", req.Command).CombinedOutput()
		res := sandbox.ExecResult{Output: string(out), Shell: "bash"}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.ExitCode = ee.ExitCode()
		} else if err != nil {
			return res, err
		}
		return res, nil
	})
}

func TestHashFiles(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum on this host")
	}
	dir := t.TempDir()
	files := map[string]string{
		"tests/test_a.py":                          "def test_a(): pass\n",
		"tests/sub/data.json":                      "{}",
		"conftest.py":                              "import pytest\n",
		"pkg/conftest.py":                          "# nested\n",
		"pkg/mod.py":                               "x = 1\n",
		".github/workflows/ci.yml":                 "on: push\n",
		"pytest.ini":                               "[pytest]\n",
		".git/tests/objects":                       "not a test",
		"tests/we ird 'name'\\.py":                 "odd\n",
		"docs/tests_overview.md":                   "no\n",
		"setup.cfg.bak":                            "no\n",
		"tests/new\nline.py":                       "newline in name\n",
		"tox.ini":                                  "[tox]\n",
		".github/CODEOWNERS":                       "* @x\n",
		"src/pkg/tests/test_deep.py":               "deep\n",
		"tests/__pycache__/test_a.cpython-311.pyc": "bytecode",
		"tests/.pytest_cache/v/x":                  "cache",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	patterns := []string{"tests/**", "conftest.py", "pytest.ini", "setup.cfg", "tox.ini", ".github/**"}
	got, err := HashFiles(t.Context(), hostShell(), dir, patterns)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, name := range []string{"tests/test_a.py", "tests/sub/data.json", "conftest.py", "pkg/conftest.py",
		".github/workflows/ci.yml", "pytest.ini", "tests/we ird 'name'\\.py", "tests/new\nline.py", "tox.ini", ".github/CODEOWNERS"} {
		sum := sha256.Sum256([]byte(files[name]))
		want[name] = hex.EncodeToString(sum[:])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HashFiles (-want +got):\n%s", diff)
	}

	// A change shows.
	os.WriteFile(filepath.Join(dir, "tests/test_a.py"), []byte("def test_a(): assert True or 0\n"), 0o644)
	got2, err := HashFiles(t.Context(), hostShell(), dir, patterns)
	if err != nil {
		t.Fatal(err)
	}
	if got2["tests/test_a.py"] == got["tests/test_a.py"] {
		t.Error("hash unchanged after edit")
	}

	// A workdir the policy removed hashes to nothing: every file counts as
	// deleted (tampering), and the episode is still graded.
	if m, err := HashFiles(t.Context(), hostShell(), filepath.Join(dir, "missing"), patterns); err != nil || len(m) != 0 {
		t.Errorf("HashFiles(missing dir) = %v, %v, want no files and no error", m, err)
	}
	if m, err := HashFiles(t.Context(), hostShell(), dir, nil); err != nil || len(m) != 0 {
		t.Errorf("HashFiles(no patterns) = %v, %v", m, err)
	}
	if _, err := HashFiles(t.Context(), hostShell(), dir, []string{"a**"}); err == nil {
		t.Error("HashFiles accepted a bad pattern")
	}
}
