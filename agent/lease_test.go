package agent

import (
	"context"
	"errors"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// TestLease: the agent ends when no client was heard from for its lease,
// and a client's heartbeats keep it alive however long it is otherwise
// idle. In a synctest bubble, the client on a net.Pipe: the minutes pass
// on the bubble's clock, and the end is checked to the lease's tick.
func TestLease(t *testing.T) {
	const (
		lease = time.Minute
		tick  = time.Second // the lease's check: min(lease/4, 1s)
	)
	tests := []struct {
		name      string
		heartbeat time.Duration // the client's; 0: no client
		connected time.Duration // how long the client stays before closing
	}{
		{name: "no client"},
		{name: "heartbeats, then the client goes", heartbeat: lease / 3, connected: 10 * lease},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, err := NewServer(ServerConfig{Workdir: t.TempDir(), Lease: lease})
				if err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				if tc.heartbeat > 0 {
					hostEnd, agentEnd := net.Pipe()
					go srv.ServeConn(context.Background(), agentEnd)
					c := NewClient(hostEnd, ClientOptions{Heartbeat: tc.heartbeat})
					time.Sleep(tc.connected)
					synctest.Wait()
					if isDone(srv) {
						t.Fatalf("agent ended after %v with a client heartbeating every %v: %v", tc.connected, tc.heartbeat, srv.Err())
					}
					c.Close()
				}
				idleFrom := time.Now()
				time.Sleep(lease - time.Millisecond)
				synctest.Wait()
				if isDone(srv) {
					t.Fatalf("agent ended %v into its %v lease: %v", time.Since(idleFrom), lease, srv.Err())
				}
				time.Sleep(tick + time.Millisecond)
				synctest.Wait()
				if !isDone(srv) {
					t.Fatalf("agent still running %v after the last client frame, lease %v", time.Since(idleFrom), lease)
				}
				if !errors.Is(srv.Err(), ErrLeaseExpired) {
					t.Errorf("err %v, want ErrLeaseExpired", srv.Err())
				}
			})
		})
	}
}

func isDone(s *Server) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}
