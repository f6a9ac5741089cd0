package trajectory

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"

	"github.com/rollcage/rollcage/internal/memnet"
)

// serveHub mounts the hub the way the gateway does.
func serveHub(t *testing.T, h *Hub) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(hubMux(h))
	t.Cleanup(srv.Close)
	return srv
}

func hubMux(h *Hub) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /episodes/{id}/stream", func(w http.ResponseWriter, r *http.Request) {
		h.ServeEpisode(w, r, r.PathValue("id"))
	})
	mux.HandleFunc("GET /finished", h.ServeFinished)
	return mux
}

func newHub(t *testing.T, s *Store, cfg HubConfig) *Hub {
	t.Helper()
	h, err := NewHub(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func dial(t *testing.T, srv *httptest.Server, path string) *websocket.Conn {
	t.Helper()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + path
	c, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", path, err, resp)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func recv(t *testing.T, c *websocket.Conn) (Event, error) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, msg, err := c.ReadMessage()
	if err != nil {
		return Event{}, err
	}
	var ev Event
	if err := json.Unmarshal(msg, &ev); err != nil {
		t.Fatalf("message %q: %v", msg, err)
	}
	return ev, nil
}

// appendSteps appends n tool_output events (Step = 0..n-1, ~1 KB each)
// and then an episode_end.
func appendSteps(t *testing.T, l *Log, n int) {
	t.Helper()
	pad := strings.Repeat("y", 1000)
	for i := range n {
		ev, _ := NewEvent("", 0, i, TypeToolOutput, ToolOutput{Output: pad})
		if _, err := l.Append(ev); err != nil {
			t.Error(err)
			return
		}
	}
	if _, err := l.Append(Event{Type: TypeEpisodeEnd, Step: n, Data: json.RawMessage(`{"reward":1}`)}); err != nil {
		t.Error(err)
	}
}

func lines(t *testing.T, evs []Event) []string {
	t.Helper()
	out := make([]string, len(evs))
	for i, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

func offsets(evs []Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Offset
	}
	return out
}

func TestHubResume(t *testing.T) {
	s := openStore(t, t.TempDir())
	h := newHub(t, s, HubConfig{})
	srv := serveHub(t, h)
	l, err := s.Log("ep")
	if err != nil {
		t.Fatal(err)
	}
	l.Append(Event{Type: TypeEpisodeStart}) // the episode exists before anyone subscribes
	done := make(chan struct{})
	go func() {
		defer close(done)
		appendSteps(t, l, 500)
	}()

	var got []Event
	c := dial(t, srv, "/episodes/ep/stream?from=0")
	for len(got) < 137 {
		ev, err := recv(t, c)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	c.Close() // drop mid-stream, no close handshake
	from := got[len(got)-1].Offset + 1
	c = dial(t, srv, fmt.Sprintf("/episodes/ep/stream?from=%d", from))
	for {
		ev, err := recv(t, c)
		if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			break // the server ends the stream after episode_end
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	<-done
	want := readAll(t, s, "ep", 0)
	if len(want) != 502 {
		t.Fatalf("store holds %d events, want 502", len(want))
	}
	// Compared as JSON lines: cmp walks byte slices one reflected element
	// at a time, which takes seconds under -race for 500 KB of payloads.
	if d := cmp.Diff(lines(t, want), lines(t, got)); d != "" {
		t.Errorf("streamed events across a reconnect (-store +streamed):\n%s", d)
	}

	// A finished episode streams from the file and ends.
	c = dial(t, srv, "/episodes/ep/stream?from=500")
	var tail []Event
	for {
		ev, err := recv(t, c)
		if err != nil {
			if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
				t.Fatal(err)
			}
			break
		}
		tail = append(tail, ev)
	}
	if d := cmp.Diff([]int64{500, 501}, offsets(tail)); d != "" {
		t.Errorf("from=500 of a finished episode (-want +got):\n%s", d)
	}
}

func TestHubSlowSubscriber(t *testing.T) {
	const n = 10000
	s := openStore(t, t.TempDir())
	h := newHub(t, s, HubConfig{})
	srv := serveHub(t, h)
	l, _ := s.Log("ep")
	l.Append(Event{Type: TypeEpisodeStart})
	c := dial(t, srv, "/episodes/ep/stream")
	if _, err := recv(t, c); err != nil {
		t.Fatal(err)
	}

	// The subscriber reads nothing more until every append has returned:
	// ~10 MB of events, far more than the socket buffers hold, so the
	// server's writer to it is stuck. Were appends tied to subscribers,
	// this would deadlock instead of finishing.
	var received atomic.Int64
	received.Store(1)
	appended := make(chan struct{})
	var atAppendsDone int64
	go func() {
		appendSteps(t, l, n)
		atAppendsDone = received.Load()
		close(appended)
	}()
	select {
	case <-appended:
	case <-time.After(2 * time.Minute):
		t.Fatal("appends blocked behind a subscriber that does not read")
	}
	if atAppendsDone >= n {
		t.Fatalf("subscriber had %d events when appends finished; want it still behind", atAppendsDone)
	}

	// Now it reads, slowly, and still gets everything in order.
	want := int64(1)
	for {
		ev, err := recv(t, c)
		if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Offset != want {
			t.Fatalf("got offset %d, want %d", ev.Offset, want)
		}
		want++
		received.Add(1)
		if want%1000 == 0 {
			time.Sleep(time.Millisecond) // a slow consumer
		}
	}
	if want != n+2 {
		t.Errorf("subscriber got offsets up to %d, want %d", want-1, n+1)
	}
}

func TestHubFinishedAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	finish := func(s *Store, id string) {
		t.Helper()
		l, err := s.Log(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range []Event{
			{Type: TypeEpisodeStart},
			{Type: TypeCompaction, Segment: 1, Data: json.RawMessage(`{"from":0,"to":1,"summary":"s"}`)},
			{Type: TypeEpisodeEnd, Segment: 1, Data: json.RawMessage(`{"reward":1}`)},
		} {
			if _, err := l.Append(ev); err != nil {
				t.Fatal(err)
			}
		}
	}

	s1, err := OpenStore(context.Background(), Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := NewHub(s1, HubConfig{})
	srv1 := serveHub(t, h1)
	c := dial(t, srv1, "/finished?from=0")
	finish(s1, "ep-a")
	var got []Event
	for len(got) < 2 {
		ev, err := recv(t, c)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	// Shutdown: the subscriber is told the server is going away.
	closed := make(chan error, 1)
	go func() {
		for {
			if _, err := recv(t, c); err != nil {
				closed <- err
				return
			}
		}
	}()
	h1.Close()
	if err := <-closed; !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Errorf("after Hub.Close the subscriber read %v, want close 1001 (going away)", err)
	}
	s1.Close()

	s2 := openStore(t, dir)
	h2 := newHub(t, s2, HubConfig{})
	srv2 := serveHub(t, h2)
	finish(s2, "ep-b")
	c = dial(t, srv2, fmt.Sprintf("/finished?from=%d", got[len(got)-1].Offset+1))
	for len(got) < 6 {
		ev, err := recv(t, c)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	want := readFinished(t, s2, 0)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("finished feed across a restart (-store +streamed):\n%s", d)
	}
	type item struct {
		Offset  int64
		Episode string
		Type    string
	}
	var items []item
	for _, ev := range got {
		items = append(items, item{ev.Offset, ev.EpisodeID, ev.Type})
	}
	wantItems := []item{
		{0, "ep-a", TypeSegmentEnd}, {1, "ep-a", TypeSegmentEnd}, {2, "ep-a", TypeEpisodeEnd},
		{3, "ep-b", TypeSegmentEnd}, {4, "ep-b", TypeSegmentEnd}, {5, "ep-b", TypeEpisodeEnd},
	}
	if d := cmp.Diff(wantItems, items); d != "" {
		t.Errorf("finished items (-want +got):\n%s", d)
	}
}

func TestHubBadRequests(t *testing.T) {
	s := openStore(t, t.TempDir())
	srv := serveHub(t, newHub(t, s, HubConfig{}))
	l, _ := s.Log("ep")
	l.Append(Event{Type: TypeEpisodeStart})
	tests := []struct {
		path string
		code int
	}{
		{"/episodes/nope/stream", http.StatusNotFound},
		{"/episodes/ep/stream?from=-1", http.StatusBadRequest},
		{"/episodes/ep/stream?from=x", http.StatusBadRequest},
		{"/episodes/_finished/stream", http.StatusBadRequest},
	}
	for _, tc := range tests {
		url := "ws" + strings.TrimPrefix(srv.URL, "http") + tc.path
		_, resp, err := websocket.DefaultDialer.Dial(url, nil)
		if err == nil || resp == nil || resp.StatusCode != tc.code {
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			t.Errorf("%s: status %d (%v), want %d", tc.path, code, err, tc.code)
		}
	}
}

// TestHubTimers: a subscriber that answers pings stays however idle; one
// that stops answering is dropped two ping intervals after connecting (its
// last pong); one that reads nothing is dropped when a write has waited
// WriteTimeout. In a synctest bubble on memnet, the intervals passing on
// the bubble's clock; memnet's net.Pipe holds no buffer, so a subscriber
// that reads nothing blocks the hub's first write to it.
func TestHubTimers(t *testing.T) {
	const (
		ping  = time.Minute
		write = 10 * time.Second
	)
	tests := []struct {
		name        string
		read, pong  bool          // the subscriber reads; it answers pings
		wantDropped time.Duration // after connecting; 0: never
	}{
		{name: "answers pings", read: true, pong: true},
		{name: "stops answering pings", read: true, wantDropped: 2 * ping},
		{name: "reads nothing", wantDropped: write},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := openStore(t, t.TempDir())
				h := newHub(t, s, HubConfig{PingInterval: ping, WriteTimeout: write})
				srv := memnet.NewServer(t, hubMux(h))
				l, _ := s.Log("ep")
				l.Append(Event{Type: TypeEpisodeStart})
				d := websocket.Dialer{NetDialContext: srv.Transport.DialContext}
				c, _, err := d.Dial("ws://memnet/episodes/ep/stream", nil)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				start := time.Now()
				msgs := make(chan Event, 16)
				if !tc.pong {
					c.SetPingHandler(func(string) error { return nil })
				}
				if tc.read {
					go func() {
						defer close(msgs)
						for {
							_, b, err := c.ReadMessage()
							if err != nil {
								return
							}
							var ev Event
							json.Unmarshal(b, &ev)
							msgs <- ev
						}
					}()
				}
				if tc.wantDropped == 0 {
					time.Sleep(10 * ping)
					synctest.Wait()
					if n := subscribers(h, "ep"); n != 1 {
						t.Fatalf("%d subscribers after %v answering pings, want 1", n, time.Since(start))
					}
					l.Append(Event{Type: TypeToolCall})
					for _, want := range []int64{0, 1} {
						if ev, ok := <-msgs; !ok || ev.Offset != want {
							t.Fatalf("got offset %d (open %v), want %d", ev.Offset, ok, want)
						}
					}
					return
				}
				time.Sleep(tc.wantDropped - time.Millisecond)
				synctest.Wait()
				if n := subscribers(h, "ep"); n != 1 {
					t.Fatalf("%d subscribers %v after connecting, want 1 until %v", n, time.Since(start), tc.wantDropped)
				}
				time.Sleep(2 * time.Millisecond)
				synctest.Wait()
				if n := subscribers(h, "ep"); n != 0 {
					t.Fatalf("%d subscribers %v after connecting, want none from %v", n, time.Since(start), tc.wantDropped)
				}
			})
		})
	}
}

func subscribers(h *Hub, stream string) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[stream])
}
