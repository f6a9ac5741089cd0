package audit

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
			eps, errs := parse(tc.name+".jsonl", []byte(tc.data), limit)
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
