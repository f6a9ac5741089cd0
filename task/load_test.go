package task

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

const goodLine = `{"id":"t1","image":"img:latest","instruction":"fix it","hidden_tests":"hidden/t1","test_command":"pytest"}`

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"missing image", `{"id":"t1","instruction":"x","hidden_tests":"hidden/t1","test_command":"pytest"}`,
			`tasks.jsonl:1: field "image" is required`},
		{"missing id after comment", "# comment\n\n" + `{"image":"i","instruction":"x","hidden_tests":"hidden/t1","test_command":"pytest"}`,
			`tasks.jsonl:3: field "id" is required`},
		{"bad JSON", goodLine + "\n{\"id\": \"t2\",",
			`tasks.jsonl:2: invalid JSON: unexpected end of line; each object must be on one line`},
		{"syntax error", `{"id" "t1"}`,
			`tasks.jsonl:1: invalid JSON near byte 7: invalid character '"' after object key`},
		{"unknown field", `{"id":"t1","imagee":"x"}`,
			`tasks.jsonl:1: unknown field "imagee"; see the task file format in the README`},
		{"wrong type", `{"id":"t1","allowed_hosts":"pypi.org"}`,
			`tasks.jsonl:1: field "allowed_hosts" must be []string, not string`},
		{"duplicate id", goodLine + "\n" + goodLine,
			`tasks.jsonl:2: duplicate id "t1" (first on line 1)`},
		{"two objects on a line", goodLine + " " + goodLine,
			`tasks.jsonl:1: invalid JSON: more than one value on the line; put one object per line`},
		{"relative workdir", `{"id":"t1","image":"i","instruction":"x","hidden_tests":"hidden/t1","test_command":"pytest","workdir":"repo"}`,
			`tasks.jsonl:1: field "workdir" is "repo"; give an absolute path inside the sandbox`},
		{"hidden escapes", `{"id":"t1","image":"i","instruction":"x","hidden_tests":"../secret","test_command":"pytest"}`,
			`tasks.jsonl:1: field "hidden_tests" is "../secret"; give a directory relative to the task file, without ..`},
		{"hidden missing", `{"id":"t1","image":"i","instruction":"x","hidden_tests":"hidden/nope","test_command":"pytest"}`,
			`tasks.jsonl:1: field "hidden_tests" names "hidden/nope", which is not a directory next to the task file`},
		{"bad id", `{"id":"a b","image":"i","instruction":"x","hidden_tests":"hidden/t1","test_command":"pytest"}`,
			`tasks.jsonl:1: field "id" is "a b"; use letters, digits, '.', '_' and '-'`},
		{"bad pattern", `{"id":"t1","image":"i","instruction":"x","hidden_tests":"hidden/t1","test_command":"pytest","protected_paths":["/opt/**x"]}`,
			`tasks.jsonl:1: field "protected_paths" has bad pattern "/opt/**x": "**" must be a whole path segment, as in a/**/b`},
		{"host with scheme", `{"id":"t1","image":"i","instruction":"x","hidden_tests":"hidden/t1","test_command":"pytest","allowed_hosts":["https://pypi.org"]}`,
			`tasks.jsonl:1: field "allowed_hosts" has "https://pypi.org"; give a bare host name such as pypi.org`},
		{"bad base commit", `{"id":"t1","image":"i","instruction":"x","hidden_tests":"hidden/t1","test_command":"pytest","base_commit":"main"}`,
			`tasks.jsonl:1: field "base_commit" is "main"; give a full lowercase commit id`},
		{"empty", "# nothing\n\n", `tasks.jsonl: no tasks; write one JSON object per line`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{
				"tasks.jsonl":         {Data: []byte(tc.file)},
				"hidden/t1/test_x.py": {Data: []byte("")},
			}
			_, err := Load(fsys, "tasks.jsonl")
			if err == nil {
				t.Fatalf("Load: no error, want %q", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("Load error:\n got %s\nwant %s", err, tc.want)
			}
			var le *LoadError
			if !errors.As(err, &le) {
				t.Errorf("error %T is not a *LoadError", err)
			}
		})
	}
}

func TestLoadDefaultsAndSubdir(t *testing.T) {
	fsys := fstest.MapFS{
		"suite/tasks.jsonl":         {Data: []byte("# demo\n" + goodLine + "\n\n")},
		"suite/hidden/t1/test_x.py": {Data: []byte("")},
	}
	got, err := Load(fsys, "suite/tasks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := []Task{{
		ID: "t1", Image: "img:latest", Instruction: "fix it", HiddenTests: "hidden/t1", TestCommand: "pytest",
		Workdir: "/workspace", HiddenTestsDest: "/opt/grader/tests",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "hidden", "t1"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "hidden", "t1", "test_h.py"), []byte("x"), 0o644)
	p := filepath.Join(dir, "tasks.jsonl")
	os.WriteFile(p, []byte(goodLine+"\n"), 0o644)
	tasks, fsys, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || tasks[0].ID != "t1" {
		t.Fatalf("tasks = %+v", tasks)
	}
	if data, err := fs.ReadFile(fsys, "hidden/t1/test_h.py"); err != nil || string(data) != "x" {
		t.Errorf("hidden FS read = %q, %v", data, err)
	}

	os.WriteFile(p, []byte(goodLine+"\n"+`{"id":"t2"`+"\n"), 0o644)
	_, _, err = LoadFile(p)
	if want := p + `:2: invalid JSON: unexpected end of line; each object must be on one line`; err == nil || err.Error() != want {
		t.Errorf("LoadFile error:\n got %v\nwant %s", err, want)
	}
	missing := filepath.Join(dir, "missing.jsonl")
	_, _, err = LoadFile(missing)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadFile(missing) = %v, want ErrNotExist", err)
	}
	// The file is named once, not again by the open's own error.
	if want := missing + ": cannot open the task file: no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("LoadFile(missing) error:\n got %v\nwant %s", err, want)
	}
}

func TestValidateAcceptsDefaults(t *testing.T) {
	tk := Task{ID: "t", Image: "i", Instruction: "x", HiddenTests: "h", TestCommand: "pytest"}
	if err := tk.Validate(); err != nil {
		t.Fatal(err)
	}
	tk.HiddenTestsDest = "/workspace/"
	var fe *FieldError
	if err := tk.Validate(); !errors.As(err, &fe) || fe.Field != "hidden_tests_dest" {
		t.Errorf("Validate with dest = workdir: %v", err)
	}
}

func TestValidateDifferentialCertainAt(t *testing.T) {
	base := Task{ID: "t", Image: "i", Instruction: "x", HiddenTests: "h", TestCommand: "c"}
	for _, tc := range []struct {
		v  float64
		ok bool
	}{{0, true}, {0.25, true}, {1, true}, {-0.1, false}, {1.5, false}} {
		tk := base
		tk.DifferentialCertainAt = tc.v
		err := tk.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("differential_certain_at %v: Validate = %v, want ok %t", tc.v, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "differential_certain_at") {
			t.Errorf("error %q does not name the field", err)
		}
	}
}
