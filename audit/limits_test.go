package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rollcage/rollcage/trajectory"
)

// episodeLine is one OpenAI-format episode with a tool call, as a JSONL
// line.
const episodeLine = `{"messages": [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "a.py"}]}`

// TestReadRefusesNonRegular: a device, a FIFO with no writer or a socket,
// named outright or met in a directory, is one FileError saying what it
// is, and is never opened for a read that would block or never end.
func TestReadRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.jsonl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.json")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	good := filepath.Join(dir, "good.jsonl")
	if err := os.WriteFile(good, []byte(episodeLine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		paths []string
		want  map[string]string // path → what its error says
		eps   int
	}{
		{"/dev/zero", []string{"/dev/zero"}, map[string]string{"/dev/zero": "a character device, not a trajectory file"}, 0},
		{"fifo", []string{fifo}, map[string]string{fifo: "a named pipe (FIFO), not a trajectory file"}, 0},
		{"socket", []string{sock}, map[string]string{sock: "a socket, not a trajectory file"}, 0},
		{"directory", []string{dir}, map[string]string{
			fifo: "a named pipe (FIFO), not a trajectory file",
			sock: "a socket, not a trajectory file",
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				eps  []Trace
				errs []FileError
			}
			done := make(chan result, 1)
			go func() { eps, errs := Read(tc.paths...); done <- result{eps, errs} }()
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Read did not return in 30s: it blocked on a non-regular file")
			}
			got := map[string]string{}
			for _, e := range r.errs {
				got[e.Path] = e.Err
			}
			if len(got) != len(tc.want) || len(r.eps) != tc.eps {
				t.Errorf("%d episodes, errors %v; want %d episodes, errors for %d paths", len(r.eps), r.errs, tc.eps, len(tc.want))
			}
			for p, want := range tc.want {
				if !strings.Contains(got[p], want) {
					t.Errorf("error for %s: %q; want it to say %q", p, got[p], want)
				}
			}
		})
	}
	// ReadFile on its own (no walk's stat before it) opens a FIFO
	// without blocking and refuses it.
	done := make(chan []FileError, 1)
	go func() { _, errs := ReadFile(fifo); done <- errs }()
	select {
	case errs := <-done:
		if len(errs) != 1 || !strings.Contains(errs[0].Err, "named pipe") {
			t.Errorf("ReadFile(fifo): %v; want one error saying it is a named pipe", errs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ReadFile(fifo) blocked")
	}
}

// TestParseValueLimit: a JSON value over the limit (a file holding one
// object or array, a JSONL line) is an error naming the limit; a JSONL
// file over it whose lines each fit is read, an over-long line skipped.
func TestParseValueLimit(t *testing.T) {
	const limit = 1 << 10
	pad := strings.Repeat("x", limit)
	big := `{"role": "user", "content": "` + pad + `"}`
	tests := []struct {
		name string
		data string
		eps  int
		want []string // the errors, "line: text"
	}{
		{"array", `[` + big + `]`, 0, []string{"0: a JSON value of 1057 bytes, over the 1024-byte limit of one value; split it (JSONL: one episode or event per line)"}},
		{"pretty object", "{\n \"messages\": [" + big + "]\n}", 0, []string{"0: a JSON value of 1074 bytes, over the 1024-byte limit of one value; split it (JSONL: one episode or event per line)"}},
		{"one-line object", `{"messages": [` + big + `]}`, 0, []string{"0: a JSON value of 1071 bytes, over the 1024-byte limit of one value; split it (JSONL: one episode or event per line)"}},
		{"jsonl, lines within", strings.Repeat(episodeLine+"\n", 4), 4, nil},
		{"jsonl, one line over", episodeLine + "\n" + `{"messages": [` + big + `]}` + "\n" + episodeLine + "\n", 2,
			[]string{"2: a JSON value of 1071 bytes, over the 1024-byte limit of one value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eps, errs := parseLimit(tc.name+".jsonl", []byte(tc.data), limit)
			var got []string
			for _, e := range errs {
				got = append(got, fmt.Sprintf("%d: %s", e.Line, e.Err))
			}
			if len(eps) != tc.eps || strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("%d episodes, errors %q; want %d, %q", len(eps), got, tc.eps, tc.want)
			}
		})
	}
	// Parse states the real limit.
	huge := make([]byte, MaxValue+2)
	copy(huge, `[`)
	for i := 1; i < len(huge); i++ {
		huge[i] = ' '
	}
	huge[len(huge)-1] = ']'
	_, errs := Parse("huge.json", huge)
	if len(errs) != 1 || !strings.Contains(errs[0].Err, "over the 64 MiB limit of one value") {
		t.Errorf("Parse of a %d-byte array: %v; want one error naming the 64 MiB limit", len(huge), errs)
	}
}

// parseLimit is Parse with another value limit.
func parseLimit(name string, data []byte, limit int) ([]Trace, []FileError) {
	var eps []Trace
	errs := parse(name, bytes.NewReader(data), limit, func(ep Trace, _ int64) error {
		eps = append(eps, ep)
		return nil
	})
	return eps, errs
}

// eventLines is a rollcage log of one episode with n calls, each output
// pad long, ended when end is set.
func eventLines(t *testing.T, id string, n int, pad string, end bool) string {
	t.Helper()
	var b strings.Builder
	add := func(step int, typ string, payload any) {
		ev, err := trajectory.NewEvent(id, 0, step, typ, payload)
		if err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	for i := 1; i <= n; i++ {
		add(i, trajectory.TypeToolCall, trajectory.ToolCall{Call: json.RawMessage(`{"tool":"bash","args":{"command":"ls"}}`)})
		add(i, trajectory.TypeToolOutput, trajectory.ToolOutput{Output: pad})
	}
	if end {
		add(n, trajectory.TypeEpisodeEnd, trajectory.EpisodeEnd{Resolved: true})
	}
	return b.String()
}

// TestParseEpisodeLimit: the lines an episode is built from (chat
// messages one per line, the events of episodes not yet ended) count
// against the value limit together; episodes of a log are given on at
// their episode_end, so that many ended episodes in one file do not add
// up; an event after its episode's end is an error of its line.
func TestParseEpisodeLimit(t *testing.T) {
	const limit = 4 << 10
	pad := strings.Repeat("x", 1000)
	msg := `{"role": "tool", "tool_call_id": "c1", "content": "` + pad + `"}` + "\n"
	call := `{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]}` + "\n"
	tests := []struct {
		name  string
		data  string
		steps []int // of each episode read
		want  []string
	}{
		{"messages within", call + msg + msg, []int{1}, nil},
		{"messages over", call + strings.Repeat(msg, 5), nil,
			[]string{"0: chat messages of one episode, one per line, over the 4096-byte limit of one episode; split it"}},
		{"events within", eventLines(t, "e1", 2, pad, true), []int{2}, nil},
		{"ended episodes add up past the limit", eventLines(t, "e1", 2, pad, true) + eventLines(t, "e2", 2, pad, true) + eventLines(t, "e3", 2, pad, true), []int{2, 2, 2}, nil},
		{"unended episodes over", eventLines(t, "e1", 3, pad, false) + eventLines(t, "e2", 3, pad, true), nil,
			[]string{"0: rollcage events of unfinished episodes over the 4096-byte limit of one episode's records; give each episode its own file, as a trajectory Store does"}},
		{"an event after its end", eventLines(t, "e1", 1, pad, true) + eventLines(t, "e1", 1, "late", false), []int{1},
			[]string{"4: a tool_call event of episode e1 after its episode_end", "5: a tool_output event of episode e1 after its episode_end"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eps, errs := parseLimit(tc.name+".jsonl", []byte(tc.data), limit)
			var got []string
			for _, e := range errs {
				got = append(got, fmt.Sprintf("%d: %s", e.Line, e.Err))
			}
			var steps []int
			for _, e := range eps {
				steps = append(steps, len(e.Steps))
			}
			if fmt.Sprint(steps) != fmt.Sprint(tc.steps) || strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("episodes of %v steps, errors %q; want %v, %q", steps, got, tc.steps, tc.want)
			}
		})
	}
}

// TestParseJSONLBadFirstLine: a JSONL file whose first line is an
// object no format reads (a message list with an element of the wrong
// type) reads on past it, as it reads on past any bad line; as the only
// line it is the file's error.
func TestParseJSONLBadFirstLine(t *testing.T) {
	bad := `{"messages": [{"role": "user", "content": "x"}, {"role": ["not", "a", "string"]}]}`
	eps, errs := Parse("two.jsonl", []byte(bad+"\n"+episodeLine+"\n"))
	if len(eps) != 1 || len(errs) != 1 || errs[0].Line != 1 || !strings.Contains(errs[0].Err, `"messages" is not a list of messages`) {
		t.Errorf("two lines: %d episodes, errors %v; want 1 and one error for line 1", len(eps), errs)
	}
	eps, errs = Parse("one.json", []byte(bad))
	if len(eps) != 0 || len(errs) != 1 || errs[0].Line != 0 || !strings.Contains(errs[0].Err, `"messages" is not a list of messages`) {
		t.Errorf("one line: %d episodes, errors %v; want none and one error for the file", len(eps), errs)
	}
}
