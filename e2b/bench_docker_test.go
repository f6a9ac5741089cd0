package e2b_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rollcage/rollcage/cmd/rollcage/servetest"
	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/e2b"
	"github.com/rollcage/rollcage/e2b/envd/process"
	"github.com/rollcage/rollcage/e2b/envd/process/processconnect"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// BenchmarkE2B measures, on a real rollcage serve --e2b-addr --pool 2
// and Docker sandboxes of the first demo task: the round trip of `true`
// through the E2B path (process Start, JSON as the JS SDK speaks it and
// binary proto as the Python SDK does) beside POST /calls on the same
// sandbox, and creating a sandbox through the E2B API with the warm
// pool (each create starts when the whole pool is refilled; the kill is
// not timed).
func BenchmarkE2B(b *testing.B) {
	be := dockertest.Backend(b)
	root := servetest.ModuleRoot(b)
	tasks, _, err := demo.Tasks()
	if err != nil {
		b.Fatal(err)
	}
	tk := tasks[0]
	sandboxtest.RequireImage(b, be, tk.Image)
	const key, admin = "e2b_0123456789abcdef0123456789abcdef01234567", "admin-e2b-bench"
	gateway, api := serveE2B(b, root, key, admin, "--pool", "2", "--max-steps", "1000000")

	post := func(url, auth string, body any) (int, []byte) {
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", url, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		if strings.HasPrefix(auth, "e2b_") {
			req.Header.Set("X-API-KEY", auth)
		} else {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.Bytes()
	}
	create := func() created {
		code, body := post(api+"/v2/sandboxes", key, map[string]any{"templateID": "base", "metadata": map[string]string{e2b.MetaImage: tk.Image}})
		var c created
		if code != 201 || json.Unmarshal(body, &c) != nil {
			b.Fatalf("create: %d %s", code, body)
		}
		return c
	}
	kill := func(id string) {
		req, _ := http.NewRequest("DELETE", api+"/sandboxes/"+id, nil)
		req.Header.Set("X-API-KEY", key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	// The pool keeps 2 warm per task image: full is every image's 2.
	images := map[string]bool{}
	for _, t := range tasks {
		images[t.Image] = true
	}
	full := 2 * len(images)
	waitWarm := func(n int) {
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			if warm(b, gateway) >= n {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.Fatalf("the warm pool did not refill to %d", n)
	}

	waitWarm(full)
	sb := create()
	defer kill(sb.SandboxID)
	ctx := context.Background()
	for _, codec := range codecs {
		pc := processconnect.NewProcessClient(&http.Client{Transport: sandboxHeaders{id: sb.SandboxID, token: sb.EnvdAccessToken}}, api, codec.opts...)
		b.Run("true/e2b-"+codec.name, func(b *testing.B) {
			for b.Loop() {
				n, err := drain(pc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: bashCfg("true")})))
				if err != nil || n < 2 {
					b.Fatalf("start true: %d events, %v", n, err)
				}
			}
		})
	}
	// The E2B path starts each command streamed, in a fresh bash wrapped
	// in a subshell; calls-subshell is /calls with that wrapping in the
	// persistent session "e2b", which separates the wrapping's cost from
	// the fresh shell's and the wire's.
	for name, call := range map[string]map[string]any{
		"calls":          {"tool": "bash", "args": map[string]string{"command": "true"}},
		"calls-subshell": {"tool": "bash", "session": "e2b", "args": map[string]string{"command": "(\ntrue\n)"}},
	} {
		b.Run("true/"+name, func(b *testing.B) {
			for b.Loop() {
				if code, body := post(gateway+"/v1/episodes/"+sb.SandboxID+"/calls", sb.EnvdAccessToken, call); code != 200 {
					b.Fatalf("calls: %d %s", code, body)
				}
			}
		})
	}
	if testing.Short() {
		return
	}
	// Creating through the E2B API and through POST /v1/episodes (the same
	// task), alternated, each from a full warm pool; medians reported.
	b.Run("create/warm", func(b *testing.B) {
		var e2bMS, v1MS []float64
		for b.Loop() {
			waitWarm(full)
			t0 := time.Now()
			c := create()
			e2bMS = append(e2bMS, float64(time.Since(t0).Microseconds())/1000)
			kill(c.SandboxID)
			waitWarm(full)
			t0 = time.Now()
			code, body := post(gateway+"/v1/episodes", admin, map[string]string{"task_id": tk.ID})
			v1MS = append(v1MS, float64(time.Since(t0).Microseconds())/1000)
			var ep struct {
				ID string `json:"episode_id"`
			}
			if code != 201 || json.Unmarshal(body, &ep) != nil {
				b.Fatalf("create: %d %s", code, body)
			}
			req, _ := http.NewRequest("DELETE", gateway+"/v1/episodes/"+ep.ID, nil)
			req.Header.Set("Authorization", "Bearer "+admin)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		b.ReportMetric(median(e2bMS), "e2b-p50-ms")
		b.ReportMetric(median(v1MS), "v1-p50-ms")
	})
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// warm reads the gateway's warm-pool gauge.
func warm(t testing.TB, gateway string) int {
	resp, err := http.Get(gateway + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "rollcage_sandbox_pool_warm "); ok {
			var n float64
			json.Unmarshal([]byte(v), &n)
			return int(n)
		}
	}
	return 0
}
