package memnet_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rollcage/rollcage/internal/memnet"
)

// TestServerInBubble: a request to a handler that waits an hour takes an
// hour of the bubble's clock and no real time, and the client's timeout
// ends the request at its own deadline.
func TestServerInBubble(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // the client's; 0: none
		want    time.Duration // fake time the request takes
		wantErr bool
	}{
		{"handler finishes", 0, time.Hour, false},
		{"client times out first", time.Minute, time.Minute, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			synctest.Test(t, func(t *testing.T) {
				s := memnet.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					select {
					case <-time.After(time.Hour):
						io.WriteString(w, "late")
					case <-r.Context().Done():
					}
				}))
				c := *s.Client
				c.Timeout = tc.timeout
				t0 := time.Now()
				resp, err := c.Get(s.URL + "/")
				if took := time.Since(t0); took != tc.want {
					t.Errorf("request took %v of the bubble's clock, want %v", took, tc.want)
				}
				if tc.wantErr {
					if err == nil {
						resp.Body.Close()
						t.Fatal("want a timeout error, got a response")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if b, _ := io.ReadAll(resp.Body); string(b) != "late" {
					t.Errorf("body %q, want %q", b, "late")
				}
			})
			if real := time.Since(start); real > time.Minute {
				t.Errorf("took %v of real time", real)
			}
		})
	}
}

func TestDialAfterClose(t *testing.T) {
	ln := memnet.Listen()
	ln.Close()
	if _, err := ln.Dial(context.Background()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("dial after close: %v, want net.ErrClosed", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("accept after close: %v, want net.ErrClosed", err)
	}
}

// TestServerClose: after Close, requests fail to dial; Close is
// idempotent (the test's cleanup closes again).
func TestServerClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memnet.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		if resp, err := s.Client.Get(s.URL + "/"); err != nil {
			t.Fatal(err)
		} else {
			resp.Body.Close()
		}
		s.Close()
		s.Close()
		if _, err := s.Client.Get(s.URL + "/"); !errors.Is(err, net.ErrClosed) {
			t.Errorf("get after close: %v, want net.ErrClosed", err)
		}
	})
}

// TestWaits: Waits gives the bubble's time between requests' arrivals.
func TestWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memnet.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		for _, pause := range []time.Duration{0, time.Second, 2 * time.Second} {
			time.Sleep(pause)
			resp, err := s.Client.Get(s.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if got, want := s.Waits(), []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("waits %v, want %v", got, want)
		}
	})
}
