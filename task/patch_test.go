package task

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testPatch = `diff --git a/tests/test_a.py b/tests/test_a.py
index 1111111..2222222 100644
--- a/tests/test_a.py
+++ b/tests/test_a.py
@@ -1,2 +1,3 @@
 import a
-def test_old(): pass
+def test_new():
+    assert a.f() == 2
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1 @@
+def test_created(): pass
diff --git a/tests/test_gone.py b/tests/test_gone.py
deleted file mode 100644
index 4444444..0000000
--- a/tests/test_gone.py
+++ /dev/null
@@ -1 +0,0 @@
-def test_gone(): pass
diff --git a/tests/data file.txt b/tests/data file.txt
--- a/tests/data file.txt
+++ b/tests/data file.txt
@@ -1 +1 @@
--- not a header
+++ not a header either
`

func TestPatchFiles(t *testing.T) {
	existing, created := PatchFiles(testPatch)
	if diff := cmp.Diff([]string{"tests/test_a.py", "tests/test_gone.py", "tests/data file.txt"}, existing); diff != "" {
		t.Errorf("existing (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tests/test_new.py"}, created); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"def test_new():", "    assert a.f() == 2", "def test_created(): pass", "++ not a header either"}, AddedLines(testPatch)); diff != "" {
		t.Errorf("AddedLines (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"def test_old(): pass", "def test_gone(): pass", "-- not a header"}, RemovedLines(testPatch)); diff != "" {
		t.Errorf("RemovedLines (-want +got):\n%s", diff)
	}
}

func TestApplyTestPatchScript(t *testing.T) {
	tk := Task{ID: "x", Workdir: "/testbed", BaseCommit: "0123456789abcdef0123456789abcdef01234567", TestPatch: testPatch}
	got, err := tk.ApplyTestPatchScript("/opt/grader/test.patch")
	if err != nil {
		t.Fatal(err)
	}
	want := "set -e\ncd /testbed\n" +
		"git checkout 0123456789abcdef0123456789abcdef01234567 -- tests/test_a.py tests/test_gone.py 'tests/data file.txt'\n" +
		"rm -rf -- tests/test_new.py\n" +
		"git apply -v /opt/grader/test.patch\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("script (-want +got):\n%s", diff)
	}
	for _, bad := range []Task{{ID: "x", BaseCommit: "0123456"}, {ID: "x", TestPatch: testPatch}} {
		if _, err := bad.ApplyTestPatchScript("/p"); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestApplyTestPatchScriptGit runs the script with git on a repository
// where the solution edited a file the test patch changes and created one
// it creates: both are reset, and the patch applies.
func TestApplyTestPatchScriptGit(t *testing.T) {
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("git", "init", "-q")
	write("tests/test_a.py", "import a\ndef test_old(): pass\n")
	write("tests/test_gone.py", "def test_gone(): pass\n")
	write("tests/data file.txt", "-- not a header\n")
	run("git", "add", "-A")
	run("git", "commit", "-qm", "base")
	base := strings.TrimSpace(run("git", "rev-parse", "HEAD"))
	// The solution's edits: a test file the patch changes, one it creates.
	write("tests/test_a.py", "import a\ndef test_old(): assert True  # edited\n")
	write("tests/test_new.py", "def test_created(): assert False\n")
	write("src.py", "fixed = True\n")
	patchPath := filepath.Join(t.TempDir(), "test.patch")
	if err := os.WriteFile(patchPath, []byte(testPatch), 0o644); err != nil {
		t.Fatal(err)
	}
	script, err := Task{ID: "x", Workdir: dir, BaseCommit: base, TestPatch: testPatch}.ApplyTestPatchScript(patchPath)
	if err != nil {
		t.Fatal(err)
	}
	run("bash", "-c", script)
	for name, want := range map[string]string{
		"tests/test_a.py":     "import a\ndef test_new():\n    assert a.f() == 2\n",
		"tests/test_new.py":   "def test_created(): pass\n",
		"tests/data file.txt": "++ not a header either\n",
		"src.py":              "fixed = True\n", // the solution's own change stays
	} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tests/test_gone.py")); !os.IsNotExist(err) {
		t.Errorf("tests/test_gone.py still there (%v)", err)
	}
}

// TestHiddenLiteralsOfTestPatch: an instance's hidden tests are its test
// patch's added lines; the task file's directory is not read.
func TestHiddenLiteralsOfTestPatch(t *testing.T) {
	patch := "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1 +1,2 @@\n-assert f() == 'old value here'\n+assert wrap('a long hidden expected line') == 31337\n"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "instances.jsonl"), []byte(`{"x": "a string in the task file"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	lit, err := HiddenLiterals(os.DirFS(dir), Task{TestPatch: patch})
	if err != nil {
		t.Fatal(err)
	}
	want := Literals{Strings: []string{"a long hidden expected line"}, Numbers: []string{"31337"}}
	if diff := cmp.Diff(want, lit); diff != "" {
		t.Errorf("literals (-want +got):\n%s", diff)
	}
}
