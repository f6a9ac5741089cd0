package agent

import (
	"bufio"
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
)

func TestRelay(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	host, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	// The fake host proxy answers each line with its reverse, then closes.
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				r := []byte(line[:len(line)-1])
				for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
					r[i], r[j] = r[j], r[i]
				}
				c.Write(append(r, '\n'))
			}()
		}
	}()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Relay(ctx, ln, sock, nil) }()

	for _, msg := range []string{"CONNECT example.org:443", "GET http://x/"} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, msg+"\n")
		got, err := io.ReadAll(c)
		c.Close()
		want := []byte(msg)
		for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
			want[i], want[j] = want[j], want[i]
		}
		if err != nil || string(got) != string(want)+"\n" {
			t.Errorf("relayed %q: got %q, %v", msg, got, err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("relay: %v", err)
	}
}
