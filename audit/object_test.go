package audit

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"
	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/internal/realcorpus"
	"github.com/rollcage/rollcage/normalize"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// sameAsRaw checks that the token-by-token reading of data, a file
// holding one JSON object, is what splitting it into raw members and
// decoding each reads: the same episode, or an error both ways. It
// reads data as it is (one line, read whole) and pretty-printed (streamed
// from the file), and returns whether data was one object to compare.
func sameAsRaw(t *testing.T, name string, data []byte) bool {
	t.Helper()
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil || obj == nil {
		return false
	}
	base := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	names := map[string]bool{}
	for k := range obj {
		names[k] = true
	}
	want, werr := parseObject(base, name, object{Rest: obj, names: names, badMessage: -1})
	if errors.Is(werr, errOneEvent) {
		return false
	}
	trimmed := bytes.TrimSpace(data)
	for _, in := range [][]byte{data, append([]byte("{\n"), trimmed[1:]...)} {
		got, errs := Parse(name, in)
		switch {
		case werr != nil:
			if len(got) != 0 || len(errs) == 0 {
				t.Errorf("%s: the raw way fails (%v), the reader reads %d episodes, errors %v", name, werr, len(got), errs)
			}
			continue
		case len(errs) > 0 || len(got) != 1:
			t.Errorf("%s: the raw way reads an episode, the reader %d with errors %v", name, len(got), errs)
			continue
		}
		if reflect.DeepEqual(want, got[0]) {
			continue
		}
		// a step's typed arguments have unexported fields: compared whole
		samePrepared := cmp.Comparer(func(a, b toolcall.Prepared) bool { return reflect.DeepEqual(a, b) })
		if d := cmp.Diff(want, got[0], cmp.AllowUnexported(Step{}), samePrepared); d != "" {
			t.Errorf("%s: the reader differs from the raw way (-raw +read):\n%s", name, d)
		}
	}
	return true
}

// TestReadMatchesRaw: on the shapes where a typed pass and a raw split
// could part (names in another case, duplicates, null or empty members,
// content as parts or a number, arguments as an object, a message
// without a role), the reader reads what the raw way reads.
func TestReadMatchesRaw(t *testing.T) {
	bashCall := `{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}`
	tool := `{"role":"tool","tool_call_id":"a","content":"x.py"}`
	tests := []struct {
		name string
		data string
		one  bool // one JSON object, compared
	}{
		{"messages", `{"id":"e1","messages":[{"role":"user","content":"fix it"},` + bashCall + `,` + tool + `]}`, true},
		{"parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},` + bashCall + `,{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"out"}]}]}`, true},
		{"number content", `{"messages":[{"role":"user","content":12.50},` + bashCall + `,{"role":"tool","tool_call_id":"a","content":{"k":1}}]}`, true},
		{"object arguments", `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"bash","arguments":{"command": "ls -l"}}}]}]}`, true},
		{"null arguments", `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"submit","arguments":null}}]}]}`, true},
		{"legacy function_call", `{"messages":[{"role":"assistant","function_call":{"name":"bash","arguments":"{\"command\":\"pwd\"}"}},{"role":"function","content":"/w"}]}`, true},
		{"mini bash block", `{"info":{"submission":"p"},"messages":[{"role":"user","content":"go"},{"role":"assistant","content":"ok\n` + "```bash\\nls\\n```" + `"},{"role":"user","content":"<returncode>0</returncode><output>a</output>"}]}`, true},
		{"invalid utf8", "{\"messages\":[{\"role\":\"assistant\",\"content\":\"```bash\\nls \xff\\n```\"}]}", true},
		{"swe-agent", `{"trajectory":[{"action":"ls","observation":"a","state":"{\"working_dir\": \"/repo\"}"}],"history":[{"role":"user","content":"issue"}],"info":{"submission":"d"}}`, true},
		{"openhands", `{"instance_id":"x__y-1","history":[{"id":1,"source":"agent","action":"run","args":{"command":"ls"}},{"id":2,"source":"agent","observation":"run","cause":1,"content":"a"}],"instance":{"base_commit":"abc"}}`, true},
		{"name in another case", `{"Messages":[` + bashCall + `],"messages":[` + bashCall + `]}`, true},
		{"only another case", `{"Messages":[` + bashCall + `]}`, true},
		{"duplicate names", `{"messages":[` + bashCall + `],"messages":[{"role":"assistant","content":"` + "```bash\\npwd\\n```" + `"}]}`, true},
		{"null trajectory", `{"trajectory":null,"messages":[` + bashCall + `]}`, true},
		{"empty trajectory", `{"trajectory":[],"messages":[` + bashCall + `]}`, true},
		{"role missing", `{"messages":[{"content":"hi"},` + bashCall + `]}`, true},
		{"no calls", `{"messages":[{"role":"user","content":"hi"}]}`, true},
		{"one event", `{"type":"call","episode_id":"e","offset":0}`, false},
		{"jsonl", `{"messages":[` + bashCall + `]}` + "\n" + `{"messages":[` + bashCall + `]}`, false},
		{"trailing bytes", `{"messages":[` + bashCall + `]} x`, false},
		{"role in another case", `{"messages":[{"Role":"user","content":"a"},` + bashCall + `]}`, true},
		{"name without its underscore", `{"messages":[{"role":"assistant","toolcalls":[]},` + bashCall + `]}`, true},
		{"duplicate role", `{"messages":[{"role":"user","role":"assistant","content":"a"},` + bashCall + `]}`, true},
		{"escaped name", `{"messages":[{"r\u006fle":"user"},` + bashCall + `]}`, true},
		{"escaped top-level name", `{"m\u0065ssages":[` + bashCall + `]}`, true},
		{"name outside ASCII", `{"messages":[{"role":"user","\u212aey":1,"ſ":2},` + bashCall + `]}`, true},
		{"role a number", `{"messages":[{"role":1},` + bashCall + `]}`, true},
		{"unknown members skipped", `{"messages":[{"role":"user","content":"a","extra":{"x":[1,2.5e3,true,null,"\u00e9\ud800"],"role":7}},` + bashCall + `,` + tool + `],"info":{"submission":"p"}}`, true},
		{"invalid skipped member", `{"messages":[{"role":"user","extra":[1,]},` + bashCall + `]}`, false},
		{"null members", `{"messages":[{"role":"assistant","content":null,"tool_calls":null,"name":null,"function_call":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},{"role":"function","content":"a"}]}`, true},
		{"null tool call and function", `{"messages":[{"role":"assistant","tool_calls":[null,{"id":"b","function":null}]},` + bashCall + `]}`, true},
		{"escapes and unicode", `{"messages":[{"role":"user","content":"t\u00e9st \"q\" \\ \/ \t é 日本"},` + bashCall + `,{"role":"tool","tool_call_id":"a","content":"a\nb\ud83d\ude00 \udc00"}]}`, true},
		{"parts scanned", `{"messages":[{"role":"user","content":[null,{"type":"image_url","image_url":{"url":"u"}},{"text":"a\nb","type":"text"},{"type":null,"text":""},{"type":"text","text":"c"}]},` + bashCall + `,{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"only"}]}]}`, true},
		{"parts ContentText reads", `{"messages":[{"role":"user","content":[{"type":1,"text":"a"}]},{"role":"user","content":["x",{"text":"y"}]},{"role":"user","content":[{"Text":"a","text":"b"}]},{"role":"user","content":[{"text":"a","text":"b"}]},{"role":"user","content":[{"text":5}]}` + `,` + bashCall + `]}`, true},
		{"step in another case", `{"trajectory":[{"Action":"ls"}]}`, true},
		{"step state object, query skipped", `{"trajectory":[null,{"action":"ls","observation":"a","state":{"working_dir":"/repo"},"query":[{"role":"system","content":"x\ny"}],"thought":"t"}]}`, true},
		{"invalid query", `{"trajectory":[{"action":"ls","query":[{"role":}]}]}`, false},
		{"observation an object", `{"trajectory":[{"action":"ls","observation":{}}]}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameAsRaw(t, tc.name+".json", []byte(tc.data)); got != tc.one {
				t.Errorf("compared: %v, want %v", got, tc.one)
			}
		})
	}
}

// raceEnabled: the test binary runs under the race detector
// (race_test.go), where reading the real corpus twice takes minutes.
var raceEnabled bool

// TestReadMatchesRawOnFiles: the same on every testdata file and, where
// it is present, the real corpus (every seventh file under -race): every
// file holding one object is compared.
func TestReadMatchesRawOnFiles(t *testing.T) {
	roots := realcorpus.With(t, "testdata")
	for _, root := range roots {
		files, compared := 0, 0
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || skipName(d.Name()) {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			if raceEnabled && root != "testdata" && files%7 != 1 {
				return nil
			}
			if sameAsRaw(t, path, data) {
				compared++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d of %d files compared", root, compared, files)
		if compared == 0 {
			t.Errorf("%s: no file holding one object compared", root)
		}
	}
}

// TestFlatText: a message's content and a call's arguments decoded in
// one pass are what decoding them raw and flattening gave.
func TestFlatText(t *testing.T) {
	oldArgs := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return string(raw)
	}
	for _, v := range []string{
		`"plain"`, `"esc\n\"q\" \u00e9 \ud83d\ude00"`, `"lone \ud800 surrogate \udc00"`, "\"bad \xff utf8\"", `null`, `""`,
		`[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]`,
		`[]`, `[1, 2]`, `["x"]`, `12.50`, `true`, `{"command": "ls"}`, `{}`,
	} {
		var got struct {
			C flatText `json:"c"`
			A argText  `json:"a"`
		}
		if err := json.Unmarshal([]byte(`{"c":`+v+`,"a":`+v+`}`), &got); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if want := trajectory.ContentText(json.RawMessage(v)); string(got.C) != want {
			t.Errorf("content %s: got %q, want %q", v, got.C, want)
		}
		if want := oldArgs(json.RawMessage(v)); string(got.A) != want {
			t.Errorf("arguments %s: got %q, want %q", v, got.A, want)
		}
	}
}

// TestPreparedNormalizesAsDecoded: a step normalized on the typed
// arguments its reader built is normalized as on its arguments' JSON
// decoded, on every format's test data and the real corpus; a step whose
// call was changed after reading is normalized on the new call.
func TestPreparedNormalizesAsDecoded(t *testing.T) {
	dirs := realcorpus.With(t, "testdata")
	typed := 0
	for _, dir := range dirs {
		eps, _ := Read(dir)
		for _, ep := range eps {
			for i, s := range ep.Steps {
				if s.prep.Call.Tool != "" {
					typed++
				}
				got := normalizeStep(s, "/work", nil)
				want := normalize.Normalize(s.Call, "/work", nil)
				if d := cmp.Diff(want, got); d != "" {
					t.Fatalf("%s step %d (%s): typed arguments normalize otherwise (-decoded +typed):\n%s", ep.Source, i+1, s.Call.Tool, d)
				}
			}
		}
	}
	if typed == 0 {
		t.Fatal("no step read carries typed arguments")
	}
	var s Step
	s.set(bash("ls"))
	s.Call.Args = []byte(`{"command":"cat /etc/passwd"}`)
	if got := normalizeStep(s, "/", nil).Raw; got != "cat /etc/passwd" {
		t.Errorf("a changed call normalizes as %q, want its new command", got)
	}
}

// FuzzRead: whatever the input, the reader returns, and what it reads of
// one object is what the raw way reads.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"fix"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},{"role":"tool","tool_call_id":"a","content":"x"}]}`,
		`{"messages":[{"role":"assistant","content":"` + "```bash\\nls\\n```" + `"},{"role":"user","content":"<output>a</output>"}],"info":{"submission":"p"}}`,
		`{"trajectory":[{"action":"ls","observation":"a","state":"{\"working_dir\": \"/r\"}","query":[1]}],"history":[{"role":"user","content":"i"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},null,{"text":"b"}]},{"role":"assistant","function_call":{"name":"bash","arguments":{"command":"ls"}}}]}`,
		`{"instance_id":"x","history":[{"id":1,"source":"agent","action":"run","args":{"command":"ls"}}]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		sameAsRaw(t, "fuzz.json", []byte(data))
	})
}

// bashBlock is the regexp bashBlocks stands for.
var bashBlock = regexp.MustCompile("(?s)```(?:bash|sh|shell)[ \t]*\n(.*?)\n?```")

var blockInputs = []string{
	"", "no block", "```bash\nls\n```", "```bash\nls```", "```bash\n```", "```bash\n\n```", "```sh \t\nls -l\n```",
	"```shell\nls\n```", "```shellx\nls\n```", "```python\nx\n``` ```bash\nls\n```", "````bash\nls\n````",
	"```bash\nls\n``````bash\npwd\n```", "a\n```bash\nls\n```\nb\n```bash\npwd\n```", "```bash ls\n```", "```bash\nls",
	"```bash\n``` ```bash\nx", "``` bash\nls\n```", "```sh\n\n\n```", "```BASH\nls\n```", "```bash\r\nls\n```",
}

// TestBashBlocks: bashBlocks finds the blocks the regexp finds.
func TestBashBlocks(t *testing.T) {
	for _, in := range blockInputs {
		checkBashBlocks(t, in)
	}
}

func checkBashBlocks(t *testing.T, in string) {
	t.Helper()
	got, n := bashBlocks(in)
	all := bashBlock.FindAllStringSubmatch(in, 2)
	want := ""
	if len(all) > 0 {
		want = all[0][1]
	}
	if n != len(all) || got != want {
		t.Errorf("bashBlocks(%q) = %q, %d; the regexp %q, %d", in, got, n, want, len(all))
	}
}

func FuzzBashBlocks(f *testing.F) {
	for _, in := range blockInputs {
		f.Add(in)
	}
	f.Fuzz(checkBashBlocks)
}
