package task

import (
	"slices"
	"testing"
)

func TestInspectCompiledConfusableAndLinks(t *testing.T) {
	tk := Task{Workdir: "/workspace", HiddenTestsDest: "/opt/grader/tests"}
	surf := Surface{Shadowable: map[string]bool{"pytest": true, "os": true}}
	diff := "diff --git a/hid b/hid\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/hid\n@@ -0,0 +1 @@\n+/opt/grader/tests\n\\ No newline at end of file\n" +
		"diff --git a/up b/up\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/up\n@@ -0,0 +1 @@\n+../../etc\n" +
		"diff --git a/in b/in\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/in\n@@ -0,0 +1 @@\n+textkit/wrap.py\n" +
		"diff --git a/textkit/__init__.py b/textkit/__init__.py\n--- a/textkit/__init__.py\n+++ b/textkit/__init__.py\n@@ -1 +1,3 @@\n+from textkіt.wrap import wrap\n+import pytеst\n+# café is a word\n"
	sub := Submission{
		Diff: []byte(diff),
		Files: []FileChange{
			{Path: "hid", Status: "A"}, {Path: "up", Status: "A"}, {Path: "in", Status: "A"}, {Path: "textkit/__init__.py", Status: "M"},
			{Path: "textkit/__pycache__/wrap.cpython-311.pyc", Status: "A"}, // beside its source: dropped, not flagged
			{Path: "textkit/fast.pyc", Status: "A"},                         // sourceless
			{Path: "textkit/__pycache__/gone.cpython-311.pyc", Status: "A"}, // no gone.py
			{Path: "textkit/_speed.cpython-311-x86_64-linux-gnu.so", Status: "A"},
			{Path: "textkіt/wrap.py", Status: "A"}, // Cyrillic і
			{Path: "docs/café.md", Status: "A"},    // non-ASCII, like nothing
		},
		Tree: []string{"textkit/__init__.py", "textkit/wrap.py", "textkit/__pycache__/wrap.cpython-311.pyc", "textkit/fast.pyc",
			"textkit/__pycache__/gone.cpython-311.pyc", "textkit/_speed.cpython-311-x86_64-linux-gnu.so", "textkіt/wrap.py", "docs/café.md", "hid", "up", "in"},
	}
	got := map[string][]string{}
	for _, f := range Inspect(tk, sub, surf) {
		got[f.File] = append(got[f.File], f.Rule)
	}
	want := map[string]string{
		"hid": "grade.symlink", "up": "grade.symlink",
		"textkit/fast.pyc": "grade.compiled_code", "textkit/__pycache__/gone.cpython-311.pyc": "grade.compiled_code",
		"textkit/_speed.cpython-311-x86_64-linux-gnu.so": "grade.compiled_code",
		"textkіt/wrap.py": "grade.confusable_name", "textkit/__init__.py": "grade.confusable_import",
	}
	for file, rule := range want {
		if !slices.Contains(got[file], rule) {
			t.Errorf("%s: rules %v, want %s", file, got[file], rule)
		}
	}
	for _, file := range []string{"in", "textkit/__pycache__/wrap.cpython-311.pyc", "docs/café.md"} {
		if len(got[file]) > 0 {
			t.Errorf("%s: flagged %v, want nothing", file, got[file])
		}
	}
	if d := BesideSource(sub); !slices.Equal(d, []string{"textkit/__pycache__/wrap.cpython-311.pyc"}) {
		t.Errorf("BesideSource = %v", d)
	}
}

func TestPycSource(t *testing.T) {
	for in, want := range map[string]string{
		"pkg/__pycache__/mod.cpython-311.pyc":   "pkg/mod.py",
		"__pycache__/top.cpython-311.opt-1.pyc": "top.py",
		"pkg/mod.pyc":                           "",
	} {
		if got := pycSource(in); got != want {
			t.Errorf("pycSource(%q) = %q, want %q", in, got, want)
		}
	}
}
