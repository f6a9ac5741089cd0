package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"

	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// TestStreams: an episode's stream follows it live to episode_end; the
// finished feed is admin only and announces the episode's end.
func TestStreams(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	cr := e.create()
	wsURL := strings.Replace(e.http.URL, "http", "ws", 1)
	dial := func(path, token string) (*websocket.Conn, int) {
		t.Helper()
		c, resp, err := websocket.DefaultDialer.Dial(wsURL+path, http.Header{"Authorization": {"Bearer " + token}})
		if err != nil {
			if resp == nil {
				t.Fatal(err)
			}
			return nil, resp.StatusCode
		}
		return c, 101
	}
	if _, code := dial("/v1/stream/finished", cr.Token); code != http.StatusForbidden {
		t.Errorf("finished feed with an episode token: %d, want 403", code)
	}
	other := e.create()
	if _, code := dial("/v1/episodes/"+cr.EpisodeID+"/stream", other.Token); code != http.StatusForbidden {
		t.Errorf("stream with another episode's token: %d, want 403", code)
	}
	conn, _ := dial("/v1/episodes/"+cr.EpisodeID+"/stream", cr.Token)
	defer conn.Close()
	feed, _ := dial("/v1/stream/finished", testAdmin)
	defer feed.Close()

	read := func() trajectory.Event {
		t.Helper()
		var ev trajectory.Event
		if err := conn.ReadJSON(&ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	if ev := read(); ev.Type != trajectory.TypeEpisodeStart {
		t.Fatalf("first event %s", ev.Type)
	}
	e.do("POST", "/v1/episodes/"+cr.EpisodeID+"/calls", cr.Token, toolcall.Call{Tool: "bash", Args: []byte(`{"command":"echo live"}`)}, nil)
	var live []string
	for range 3 {
		live = append(live, read().Type)
	}
	if diff := cmp.Diff([]string{"tool_call", "decision", "tool_output"}, live); diff != "" {
		t.Errorf("live events (-want +got):\n%s", diff)
	}
	e.do("POST", "/v1/episodes/"+cr.EpisodeID+"/submit", cr.Token, nil, nil)
	var last trajectory.Event
	for last.Type != trajectory.TypeEpisodeEnd {
		last = read()
	}
	var ev trajectory.Event
	if err := conn.ReadJSON(&ev); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("after episode_end: %v, want a normal close", err)
	}
	for {
		var item trajectory.Event
		if err := feed.ReadJSON(&item); err != nil {
			t.Fatal(err)
		}
		if item.Type == trajectory.TypeEpisodeEnd && item.EpisodeID == cr.EpisodeID {
			break
		}
	}
}
