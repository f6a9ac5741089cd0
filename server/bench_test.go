package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
)

var benchCall = toolcall.Call{Tool: "bash", Args: []byte(`{"command":"echo hi"}`)}

// BenchmarkCall compares one tool call made in-process (Episode.Call: the
// monitor, a fake sandbox that answers instantly, the trajectory) with the
// same call through the gateway over loopback HTTP. The difference is the
// gateway's overhead per call.
func BenchmarkCall(b *testing.B) {
	b.Run("in-process", func(b *testing.B) {
		e := newEnv(b, &fake.Backend{}, func(c *Config) { c.Rate = -1 })
		ep, err := e.srv.cfg.Runner.Start(context.Background(), fakeTask, fakeHidden, harness.EpisodeMeta{})
		if err != nil {
			b.Fatal(err)
		}
		defer ep.Close(context.Background())
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ep.Call(context.Background(), benchCall); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gateway", func(b *testing.B) {
		e := newEnv(b, &fake.Backend{}, func(c *Config) { c.Rate = -1 })
		cr := e.create()
		client := e.http.Client()
		body := []byte(`{"tool":"bash","args":{"command":"echo hi"}}`)
		b.ReportAllocs()
		for b.Loop() {
			if err := post(client, cr.CallsURL, cr.Token, body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func post(c *http.Client, url, token string, body []byte) error {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// BenchmarkConcurrent64 runs 64 clients, each driving its own episode,
// and reports the latency of their calls (p50, p99) and the errors (which
// must be 0).
func BenchmarkConcurrent64(b *testing.B) {
	const clients = 64
	e := newEnv(b, &fake.Backend{}, func(c *Config) { c.Rate = -1 })
	eps := make([]CreateResponse, clients)
	for i := range eps {
		eps[i] = e.create()
	}
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	body := []byte(`{"tool":"bash","args":{"command":"echo hi"}}`)
	var (
		mu     sync.Mutex
		lat    []time.Duration
		errors int
	)
	b.ResetTimer()
	var wg sync.WaitGroup
	per := max(b.N/clients, 1)
	for i := range clients {
		wg.Go(func() {
			mine := make([]time.Duration, 0, per)
			bad := 0
			for range per {
				t0 := time.Now()
				if err := post(client, eps[i].CallsURL, eps[i].Token, body); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errors += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(errors), "errors")
	if errors > 0 {
		b.Errorf("%d calls failed", errors)
	}
}
