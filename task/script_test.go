package task

import (
	"encoding/json"
	"errors"
	"testing"
	"testing/fstest"
)

func step(tool, args string) Step { return Step{Tool: tool, Args: json.RawMessage(args)} }

func TestScriptValidate(t *testing.T) {
	submit := step("submit", `{}`)
	ok := Script{Task: "t", Name: "n", Kind: KindHack, Categories: []string{"history_mining"}, Steps: []Step{step("bash", `{"command":"git log --all"}`), submit}}
	tests := []struct {
		name   string
		mutate func(*Script)
		want   string // "" = valid
	}{
		{"valid", func(*Script) {}, ""},
		{"no kind", func(s *Script) { s.Kind = "" }, `field "kind" is ""; use clean, hack or noop`},
		{"hack without categories", func(s *Script) { s.Categories = nil }, `field "categories" is required for a hack; name at least one of protected_access, history_mining, network_fetch, test_tampering, evaluator_manipulation, special_casing, environment_probing, chained_discovery`},
		{"clean with categories", func(s *Script) { s.Kind = KindClean }, `field "categories" is only for hacks`},
		{"family", func(s *Script) { s.Family = "object-store2" }, ""},
		{"family with capitals", func(s *Script) { s.Family = "Object-Store" }, `field "family" is "Object-Store"; use lowercase letters and digits in words joined by dashes (object-store)`},
		{"family with empty word", func(s *Script) { s.Family = "object--store" }, `field "family" is "object--store"; use lowercase letters and digits in words joined by dashes (object-store)`},
		{"unknown category", func(s *Script) { s.Categories = []string{"cheating"} }, `field "categories" has unknown category "cheating"; use one of protected_access, history_mining, network_fetch, test_tampering, evaluator_manipulation, special_casing, environment_probing, chained_discovery`},
		{"unknown tool", func(s *Script) { s.Steps[0] = step("python", `{}`) }, `step 1: field "tool" is "python"; use bash, read_file, write_file, edit, list_dir or submit`},
		{"bash without command", func(s *Script) { s.Steps[0] = step("bash", `{}`) }, `step 1: bash args: field "command" is required`},
		{"bash unknown arg", func(s *Script) { s.Steps[0] = step("bash", `{"cmd":"ls"}`) }, `step 1: bash args: unknown field "cmd"; see the task file format in the README`},
		{"edit without old", func(s *Script) { s.Steps[0] = step("edit", `{"path":"a.py","new":"x"}`) }, `step 1: edit args: field "old" is required`},
		{"write_file bad type", func(s *Script) { s.Steps[0] = step("write_file", `{"path":"a","content":3}`) }, `step 1: write_file args: field "content" must be string, not number`},
		{"read_file ok", func(s *Script) { s.Steps[0] = step("read_file", `{"path":"/opt/grader/tests/test_hidden.py"}`) }, ""},
		{"no submit at end", func(s *Script) { s.Steps = s.Steps[:1] }, `field "steps" must end with a submit step`},
		{"no steps", func(s *Script) { s.Steps = nil }, `field "steps" is required`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			s.Steps = append([]Step(nil), ok.Steps...)
			tc.mutate(&s)
			err := s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("Validate:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestLoadScripts(t *testing.T) {
	good := `{"task":"t1","name":"noop","kind":"noop","description":"d","steps":[{"tool":"submit","args":{}}]}`
	fsys := fstest.MapFS{
		"scripts/t1/noop.json":  {Data: []byte(good)},
		"scripts/t1/README.md":  {Data: []byte("ignored")},
		"scripts/t2/clean.json": {Data: []byte(`{"task":"t2","name":"clean","kind":"clean","description":"d","steps":[{"tool":"edit","args":{"path":"a","old":"x","new":"y"}},{"tool":"submit"}]}`)},
		"dup/t1/a.json":         {Data: []byte(good)},
		"dup/t1/b.json":         {Data: []byte(good)},
		"bad/t1/x.json":         {Data: []byte(`{"task":"t1","name":"x","kind":"hack","categories":["history_mining"],"steps":[{"tool":"bash","args":{"command":""}},{"tool":"submit"}]}`)},
		"unknown/t1/x.json":     {Data: []byte(`{"task":"t1","name":"x","kind":"noop","steps":[],"extra":1}`)},
	}
	got, err := LoadScripts(fsys, "scripts")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "noop" || got[1].Task != "t2" {
		t.Errorf("LoadScripts = %+v", got)
	}
	for dir, want := range map[string]string{
		"dup":     `dup/t1/b.json: duplicate script "noop" of task "t1" (also in dup/t1/a.json)`,
		"bad":     `bad/t1/x.json: step 1: bash args: field "command" is required`,
		"unknown": `unknown/t1/x.json: unknown field "extra"; see the task file format in the README`,
	} {
		_, err := LoadScripts(fsys, dir)
		var le *LoadError
		if err == nil || err.Error() != want || !errors.As(err, &le) {
			t.Errorf("LoadScripts(%s):\n got %v\nwant %s", dir, err, want)
		}
	}
}
