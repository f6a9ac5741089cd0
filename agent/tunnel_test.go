package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/sandbox"
)

// tunnelFixture is an agent with a tunnel on an abstract socket, the egress
// relay in front of it (as rollcage-agent runs it) and, on the host, an
// echo server standing in for the egress proxy.
type tunnelFixture struct {
	client *Client
	tun    *Tunnel
	relay  string // the relay's TCP address: what HTTP_PROXY points to
}

func newTunnelFixture(t *testing.T) *tunnelFixture {
	t.Helper()
	_, c := newTestServer(t, ServerConfig{})
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	host, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	go func() {
		for {
			conn, err := host.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				io.Copy(conn, conn)
				conn.(*net.UnixConn).CloseWrite()
			}()
		}
	}()
	path := "@rollcage-test-" + rand.Text()
	tun, err := c.Tunnel(t.Context(), path, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tun.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Relay(ctx, ln, path, nil) }()
	t.Cleanup(func() { cancel(); <-done })
	return &tunnelFixture{client: c, tun: tun, relay: ln.Addr().String()}
}

// TestTunnel: four connections at once, each 512 KiB (two windows) each
// way, arrive whole and in order, half-closes passed on.
func TestTunnel(t *testing.T) {
	f := newTunnelFixture(t)
	var g errgroup.Group
	for i := range 4 {
		g.Go(func() error {
			conn, err := net.Dial("tcp", f.relay)
			if err != nil {
				return err
			}
			defer conn.Close()
			data := make([]byte, 512<<10+i)
			rand.Read(data)
			go func() {
				conn.Write(data)
				conn.(*net.TCPConn).CloseWrite()
			}()
			conn.SetDeadline(time.Now().Add(time.Minute))
			got, err := io.ReadAll(conn)
			if err != nil {
				return fmt.Errorf("connection %d: %w", i, err)
			}
			if !bytes.Equal(got, data) {
				return fmt.Errorf("connection %d: %d bytes back, want the %d sent", i, len(got), len(data))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestTunnelStalledReader: the agent goes on answering beside a
// connection whose sandbox end writes and never reads (the window, not the
// frame reader, holds its data; TestTunnelWindow checks the window).
func TestTunnelStalledReader(t *testing.T) {
	f := newTunnelFixture(t)
	conn, err := net.Dial("tcp", f.relay)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go io.Copy(conn, io.LimitReader(rand.Reader, 32<<20))
	time.Sleep(time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res, err := f.client.Exec(ctx, sandbox.ExecRequest{Command: "echo still-answering"})
	if err != nil || strings.TrimSpace(res.Output) != "still-answering" {
		t.Fatalf("exec beside a stalled tunnel connection: %q, %v", res.Output, err)
	}
}

// TestTunnelWindow: a sender waits for credit past the window and goes on
// when the receiver acknowledges; a receiver refuses data past the window
// (a peer that ignores credit) and hands on the rest in order, then eof.
// The sender's wait runs in a synctest bubble: synctest.Wait returns once
// it is blocked, so "it waits" is checked without a sleep.
func TestTunnelWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWindow()
		if !w.take(tunnelWindow) {
			t.Fatal("take of the whole window refused")
		}
		got := make(chan bool, 1)
		go func() { got <- w.take(1) }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("take past the window did not wait")
		default:
		}
		w.give(1)
		if ok := <-got; !ok {
			t.Fatal("take after give failed")
		}
		go func() { got <- w.take(1) }()
		w.close()
		if ok := <-got; ok {
			t.Fatal("take on a closed window succeeded")
		}
	})

	q := newInbox()
	if !q.put(make([]byte, tunnelWindow-1)) || !q.put([]byte{7}) {
		t.Fatal("put within the window refused")
	}
	if q.put([]byte{8}) {
		t.Fatal("put past the window accepted")
	}
	q.putEOF()
	if b, eof, ok := q.next(); !ok || eof || len(b) != tunnelWindow-1 {
		t.Fatalf("first chunk: %d bytes, eof %v, ok %v", len(b), eof, ok)
	}
	if b, eof, ok := q.next(); !ok || eof || !bytes.Equal(b, []byte{7}) {
		t.Fatalf("second chunk: %v, eof %v, ok %v", b, eof, ok)
	}
	if _, eof, ok := q.next(); !ok || !eof {
		t.Fatalf("after the data: eof %v, ok %v; want eof", eof, ok)
	}
}

// TestTunnelClose: after Close the relay's connections find nobody (the
// agent stopped listening), and a path that is not an abstract socket name
// is refused.
func TestTunnelClose(t *testing.T) {
	f := newTunnelFixture(t)
	f.tun.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", f.relay)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(conn, "hello")
		got, _ := io.ReadAll(conn)
		conn.Close()
		if len(got) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still echoed %q after Close", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := f.client.Tunnel(t.Context(), "/tmp/not-abstract", func(context.Context) (net.Conn, error) { return nil, nil })
	if err == nil || !strings.Contains(err.Error(), "abstract socket name") {
		t.Errorf("Tunnel on a file path: %v, want a refusal naming abstract sockets", err)
	}
}
