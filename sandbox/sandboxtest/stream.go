package sandboxtest

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// testStream checks a Streamer: output as it comes, stdout and stderr
// apart, stdin after start, a session call beside a running stream, a
// signal, the sandbox user.
func (s *suite) testStream(t *testing.T, sb sandbox.Sandbox) {
	st, ok := sb.(sandbox.Streamer)
	if !ok {
		t.Skip("the backend streams no commands (sandbox.Streamer)")
	}
	var mu sync.Mutex
	got := map[string]string{}
	out := func(o sandbox.Output) {
		mu.Lock()
		got[o.Stream] += string(o.Data)
		mu.Unlock()
	}
	seen := func(stream, want string) bool {
		mu.Lock()
		defer mu.Unlock()
		return got[stream] == want
	}
	uid := "1000\n"
	if s.opts.HostUser {
		uid = strconv.Itoa(os.Getuid()) + "\n"
	}
	p, err := st.Start(t.Context(), sandbox.StartRequest{Command: "id -u; echo to-stderr >&2; read l; echo in:$l; cat >/dev/null; echo closed", Stdin: true, Timeout: 30 * time.Second}, out)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "uid and stderr streamed before any input", func() bool { return seen(sandbox.Stdout, uid) && seen(sandbox.Stderr, "to-stderr\n") })
	if r := sh(t, sb, "echo beside"); r != "beside" {
		t.Fatalf("session call beside a stream: %q", r)
	}
	if err := p.Input(t.Context(), []byte("abc\n")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the input's echo", func() bool { return seen(sandbox.Stdout, uid+"in:abc\n") })
	if err := p.CloseInput(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !seen(sandbox.Stdout, uid+"in:abc\nclosed\n") || !strings.Contains(res.Output, "to-stderr") {
		t.Fatalf("streamed command: exit %d, output %q, streamed %q", res.ExitCode, res.Output, got)
	}

	p, err = st.Start(t.Context(), sandbox.StartRequest{Command: "sleep 60", Timeout: 90 * time.Second}, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(t.Context(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Wait(t.Context()); err != nil || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("after SIGKILL: %+v, %v", res, err)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
