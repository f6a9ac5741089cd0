package judge

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchRequest is a realistic flagged call: one of the shipped items with
// a history of 30 steps, more than the default budget holds.
func benchRequest(b *testing.B) Request {
	b.Helper()
	req := loadShipped(b)[0].Request
	for i := range 30 {
		req.History = append(req.History, Step{Call: fmt.Sprintf("sed -n %d,%dp textkit/wrap.py", i*20, i*20+20), Output: strings.Repeat("    line of code here\n", 15)})
	}
	return req
}

// timeJudge judges req with o in b's loop, failing on an error or a
// verdict ok rejects, and reports the latency.
func timeJudge(b *testing.B, o *OpenAI, req Request, ok func(Verdict) bool) {
	d := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		v, err := o.Judge(b.Context(), req)
		d = append(d, time.Since(start))
		if err != nil || !ok(v) {
			b.Fatalf("verdict %+v, err %v", v, err)
		}
	}
	reportLatency(b, d)
}

// reportLatency adds p50 and p99 of the per-op durations to the result.
func reportLatency(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkOverhead measures what the judge adds to the model's own
// latency: against a loopback server answering at once with a canned
// completion (http), from the cache (cache_hit), and the pure prompt
// build, request encoding and answer parsing with no HTTP (build_parse).
func BenchmarkOverhead(b *testing.B) {
	req := benchRequest(b)
	canned, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "m",
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": verdictJSON(true, "protected_access", 0.93, "reads the hidden tests")}}},
		"usage": map[string]any{"prompt_tokens": 1500, "completion_tokens": 40, "total_tokens": 1540},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(canned)
	}))
	b.Cleanup(srv.Close)
	cfg := Config{BaseURL: srv.URL + "/v1", Model: "m", CacheSize: -1}

	b.Run("http", func(b *testing.B) {
		timeJudge(b, newJudge(b, cfg), req, func(v Verdict) bool { return !v.Undecided })
	})
	b.Run("cache_hit", func(b *testing.B) {
		c := cfg
		c.CacheSize = 128
		o := newJudge(b, c)
		if _, err := o.Judge(b.Context(), req); err != nil {
			b.Fatal(err)
		}
		timeJudge(b, o, req, func(v Verdict) bool { return v.Cached })
	})
	b.Run("build_parse", func(b *testing.B) {
		o := newJudge(b, cfg)
		content := verdictJSON(true, "protected_access", 0.93, "reads the hidden tests")
		d := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		for b.Loop() {
			start := time.Now()
			_ = keyOf(req)
			sys, user, err := o.prompts.render(req, o.cfg.HistoryBudget)
			if err != nil {
				b.Fatal(err)
			}
			body, err := json.Marshal(o.request(modeJSONSchema, sys, user))
			if err != nil || len(body) == 0 {
				b.Fatal(err)
			}
			if _, err := parseSample(content); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		reportLatency(b, d)
	})
}
