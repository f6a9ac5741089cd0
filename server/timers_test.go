package server

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
)

// TestIdleReaper: the reaper closes an episode unused for IdleTimeout at
// its next tick (every IdleTimeout/4 here), and calls keep an episode
// open however long it runs. In a synctest bubble on memnet, so the
// reaper's ticker runs on the bubble's clock and the close is pinned to
// its tick.
func TestIdleReaper(t *testing.T) {
	const (
		idle = time.Minute
		tick = idle / 4
	)
	tests := []struct {
		name     string
		useEvery time.Duration // a call this often for busy; 0: none
		busy     time.Duration
	}{
		{name: "idle from the start"},
		{name: "busy for ten minutes, then idle", useEvery: idle / 2, busy: 10 * idle},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newBubbleEnv(t, &fake.Backend{}, func(c *Config) { c.IdleTimeout = idle })
				cr := e.create()
				for busy := time.Duration(0); busy < tc.busy; busy += tc.useEvery {
					time.Sleep(tc.useEvery)
					if code, _ := e.do("POST", "/v1/episodes/"+cr.EpisodeID+"/calls", cr.Token, toolcall.Call{Tool: "bash", Args: []byte(`{"command":"true"}`)}, nil); code != http.StatusOK {
						t.Fatalf("call %v in: %d", busy, code)
					}
				}
				lastUse := time.Now()
				// Unused for exactly idle at a tick, the episode is not
				// yet past it; the next tick closes it.
				time.Sleep(idle + tick - time.Millisecond)
				synctest.Wait()
				if st := stateOf(t, e, cr.EpisodeID); st != StateRunning {
					t.Fatalf("state %s %v after the last use, want %s until the tick after the idle timeout %v", st, time.Since(lastUse), StateRunning, idle)
				}
				time.Sleep(2 * time.Millisecond)
				synctest.Wait()
				if st := stateOf(t, e, cr.EpisodeID); st == StateRunning {
					t.Fatalf("state %s %v after the last use, want it closed (idle timeout %v, reaper every %v)", st, time.Since(lastUse), idle, tick)
				}
			})
		})
	}
}

// stateOf reads an episode's state without touching it (a request would
// count as a use).
func stateOf(t *testing.T, e *env, id string) string {
	t.Helper()
	e.srv.mu.Lock()
	se := e.srv.episodes[id]
	e.srv.mu.Unlock()
	if se == nil {
		t.Fatalf("episode %s unknown to the gateway", id)
	}
	st, _ := se.getState()
	return st
}

// TestGroupWait: GET of a group whose episodes have not ended answers
// when its wait runs out, exactly (a synctest bubble's clock).
func TestGroupWait(t *testing.T) {
	tests := []struct {
		name, query string
		want        time.Duration
	}{
		{"default", "", DefaultGroupWait},
		{"none", "?wait=0s", 0},
		{"ten minutes", "?wait=10m", 10 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newBubbleEnv(t, &fake.Backend{}, nil)
				var gr GroupResponse
				if code, _ := e.do("POST", "/v1/groups", testAdmin, GroupRequest{TaskID: fakeTask.ID, N: 2}, &gr); code != http.StatusCreated {
					t.Fatalf("create group: %d", code)
				}
				start := time.Now()
				var gi GroupInfo
				if code, _ := e.do("GET", "/v1/groups/"+gr.GroupID+tc.query, testAdmin, nil, &gi); code != http.StatusOK || gi.Done {
					t.Fatalf("GET group%s: %d %+v, want 200, not done", tc.query, code, gi)
				}
				if took := time.Since(start); took != tc.want {
					t.Errorf("GET group%s answered after %v, want %v", tc.query, took, tc.want)
				}
			})
		})
	}
}
