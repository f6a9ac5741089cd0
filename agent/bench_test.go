package agent

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// BenchmarkExecTrue is the round trip of `true` from Client to Server over
// a unix socket: frame, the command through the session's shell with the
// state dump, reply. persistent runs it in the session's live bash,
// percall in a fresh shell that first restores the state.
func BenchmarkExecTrue(b *testing.B) {
	for _, mode := range []string{ModePersistent, ModePerCall} {
		b.Run(mode, func(b *testing.B) { benchExecTrue(b, mode) })
	}
}

func benchExecTrue(b *testing.B, mode string) {
	c := benchClient(b, ServerConfig{Workdir: b.TempDir(), ShellMode: mode})
	ctx := b.Context()
	// Give the session some state so restore and dump do real work.
	if _, err := c.Exec(ctx, sandbox.ExecRequest{Command: "export A=1 B=2; f() { :; }; cd /tmp"}); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		res, err := c.Exec(ctx, sandbox.ExecRequest{Command: "true"})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %+v %v", res, err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatency(b, "", lat)
}

// BenchmarkStartTrue is `true` as a streamed command (Start, Wait: a
// fresh shell, stdout and stderr on their own pipes), beside Exec in the
// persistent session, alternated in one loop so both see the same load.
func BenchmarkStartTrue(b *testing.B) {
	c := benchClient(b, ServerConfig{Workdir: b.TempDir(), ShellMode: ModePersistent})
	ctx := b.Context()
	var startLat, execLat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		p, err := c.Start(ctx, sandbox.StartRequest{Command: "true"}, func(sandbox.Output) {})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := p.Wait(ctx); err != nil || res.ExitCode != 0 {
			b.Fatalf("start: %+v %v", res, err)
		}
		startLat = append(startLat, time.Since(t0))
		t0 = time.Now()
		if res, err := c.Exec(ctx, sandbox.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %+v %v", res, err)
		}
		execLat = append(execLat, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, "start-", startLat)
	reportLatency(b, "exec-", execLat)
}

// reportLatency reports the median and 99th percentile of lat, in µs,
// as <prefix>p50-µs and <prefix>p99-µs.
func reportLatency(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), prefix+"p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), prefix+"p99-µs")
}

// benchClient serves cfg on a unix socket and returns a client of it; both
// end with the benchmark.
func benchClient(b *testing.B, cfg ServerConfig) *Client {
	srv, err := NewServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	sock := b.TempDir() + "/agent.sock"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(context.Background(), ln)
	conn, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	c := NewClient(conn, ClientOptions{})
	b.Cleanup(func() { c.Close() })
	return c
}
