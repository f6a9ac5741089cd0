package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// TestModelRouteInDocker gives an episode of a runner in network mode none
// a model route to a stand-in for the trainer's model adapter (OpenAI chat
// completions on the host's loopback). The episode runs with the egress
// proxy; from inside the real sandbox a chat completion under the route
// reaches the stand-in and is recorded as a network event naming the
// route; another path or port on the adapter's host, another host on the
// host's loopback (which the rules take for the sandbox's own) and another
// host are refused and reach nothing.
func TestModelRouteInDocker(t *testing.T) {
	b, tk, hidden := harnesstest.DockerDemoTask(t, "textwrap")

	// Not 127.0.0.1: the sandbox's NO_PROXY keeps its own loopback off the
	// proxy.
	var hits, strays atomic.Int32
	listen := func(addr string, h http.HandlerFunc) string {
		ln, err := net.Listen("tcp", addr+":0")
		if err != nil {
			t.Fatal(err)
		}
		s := httptest.NewUnstartedServer(h)
		s.Listener = ln
		s.Start()
		t.Cleanup(s.Close)
		return ln.Addr().String()
	}
	adapter := listen("127.0.0.2", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || !strings.Contains(string(body), `"messages"`) {
			strays.Add(1)
			http.Error(w, "not a chat completion", http.StatusNotFound)
			return
		}
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"policy","choices":[{"index":0,"message":{"role":"assistant","content":"run the tests"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`)
	})
	stray := func(w http.ResponseWriter, r *http.Request) {
		strays.Add(1)
		io.WriteString(w, "stray request reached")
	}
	other := listen("127.0.0.2", stray)     // another port on the adapter's host
	otherHost := listen("127.0.0.3", stray) // another host on the loopback
	route := "http://" + adapter + "/v1"

	r, st := testRunner(t, b, Limits{})
	if r.cfg.Network != sandbox.NetworkNone {
		t.Fatalf("runner network %q, want none: the route alone must turn the proxy on", r.cfg.Network)
	}
	ctx := context.Background()
	ep, err := r.Start(ctx, tk, hidden, EpisodeMeta{ModelRoutes: []string{route}})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close(ctx)

	call := func(cmd string) string {
		t.Helper()
		args, _ := json.Marshal(toolcall.BashArgs{Command: cmd})
		res, err := ep.Call(ctx, toolcall.Call{Tool: toolcall.Bash, Args: args})
		if err != nil {
			t.Fatal(err)
		}
		return res.Output
	}
	status := func(url string) string {
		return strings.TrimSpace(call(fmt.Sprintf(`curl -s -o /dev/null -w '%%{http_code}' -X POST -H 'Content-Type: application/json' -d '{"model":"policy","messages":[{"role":"user","content":"hi"}]}' %s`, url)))
	}

	out := call(`curl -s -X POST -H 'Content-Type: application/json' -d '{"model":"policy","messages":[{"role":"user","content":"fix the bug"}]}' ` + route + `/chat/completions`)
	if !strings.Contains(out, `"chat.completion"`) || hits.Load() != 1 {
		t.Fatalf("chat completion under the route: output %q, adapter hits %d, want the stand-in's answer", out, hits.Load())
	}
	refused := []string{
		"http://" + adapter + "/admin",                    // another path on the adapter
		"http://" + adapter + "/v1/../admin",              // out of the prefix by dot segments
		"http://" + other + "/v1/chat/completions",        // another port on the adapter's host
		"http://" + otherHost + "/v1/chat/completions",    // another loopback host
		"http://adapter.invalid:8000/v1/chat/completions", // another host
	}
	for _, u := range refused {
		if got := status("--path-as-is " + u); got != "403" {
			t.Errorf("%s: status %q, want 403", u, got)
		}
	}
	if strays.Load() != 0 || hits.Load() != 1 {
		t.Errorf("refused requests reached the host: %d strays, %d adapter hits", strays.Load(), hits.Load())
	}

	var nets []trajectory.Network
	for _, ev := range events(t, st, ep.ID()) {
		switch ev.Type {
		case trajectory.TypeNetwork:
			var n trajectory.Network
			if err := ev.Decode(&n); err != nil {
				t.Fatal(err)
			}
			nets = append(nets, n)
		case trajectory.TypeEpisodeStart:
			var s trajectory.EpisodeStart
			if err := ev.Decode(&s); err != nil {
				t.Fatal(err)
			}
			if cfg := string(s.Config); !strings.Contains(cfg, `"network":"proxy"`) || !strings.Contains(cfg, `"model_routes":["`+route+`"]`) {
				t.Errorf("episode_start config %s, want network proxy and the route", cfg)
			}
		}
	}
	if len(nets) != 1+len(refused) {
		t.Fatalf("network events %+v, want %d", nets, 1+len(refused))
	}
	if n := nets[0]; !n.Allowed || n.Route != route || n.Status != http.StatusOK || n.URL != route+"/chat/completions" {
		t.Errorf("routed request recorded as %+v, want allowed under %s", n, route)
	}
	for i, n := range nets[1:] {
		if n.Allowed || n.Route != "" || n.Status != http.StatusForbidden {
			t.Errorf("refused request %d recorded as %+v, want a 403 under no route", i, n)
		}
	}
}
