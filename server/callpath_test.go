package server

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
)

// TestCallPath records the stack a gateway call reaches the sandbox with
// and holds it to server → harness → monitor → sandbox, each of our
// packages entered once and in that order (a foreign tool name, mapped on
// the way, included). What returns before the sandbox (the mapping and
// argument checks) takes the same path: the gateway cannot import the
// monitor (TestLayering).
func TestCallPath(t *testing.T) {
	var mu sync.Mutex
	var paths [][]string
	e := newEnv(t, &fake.Backend{Exec: func(ctx context.Context, sb *fake.Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		mu.Lock()
		paths = append(paths, ourPackages(2))
		mu.Unlock()
		return fake.Echo(ctx, sb, req)
	}}, nil)
	cr := e.create()
	for _, body := range []string{`{"tool":"bash","args":{"command":"echo a"}}`, `{"tool":"execute_bash","args":{"command":"echo b"}}`} {
		var res CallResponse
		if code, _ := e.do("POST", "/v1/episodes/"+cr.EpisodeID+"/calls", cr.Token, body, &res); code != 200 {
			t.Fatalf("%s: %d %+v", body, code, res)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 2 {
		t.Fatalf("the sandbox ran %d policy commands, want 2", len(paths))
	}
	want := []string{"server", "harness", "monitor", "sandbox/fake"}
	for i, p := range paths {
		if !slices.Equal(p, want) {
			t.Errorf("call %d reached the sandbox through %v, want %v", i+1, p, want)
		}
	}
}

// ourPackages is the caller's stack (skip frames above it left out) as
// the packages of ours it passes through, outermost first, a run of
// frames in one package counted once.
func ourPackages(skip int) []string {
	pcs := make([]uintptr, 256)
	n := runtime.Callers(skip+1, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var out []string
	for {
		f, more := frames.Next()
		if rest, ok := strings.CutPrefix(f.Function, "github.com/rollcage/rollcage/"); ok {
			// "server.(*Server).handleCall", "sandbox/fake.(*Backend).exec"
			slash := strings.LastIndex(rest, "/")
			pkg := rest[:slash+1] + strings.SplitN(rest[slash+1:], ".", 2)[0]
			if len(out) == 0 || out[len(out)-1] != pkg {
				out = append(out, pkg)
			}
		}
		if !more {
			break
		}
	}
	slices.Reverse(out)
	return out
}
