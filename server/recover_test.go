package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// recordingRemover records the episodes whose sandboxes it was asked to
// remove.
type recordingRemover struct {
	mu  sync.Mutex
	ids []string // guarded by mu
}

func (r *recordingRemover) RemoveEpisode(ctx context.Context, id string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
	return 1, nil
}

// TestRestartEndsUnfinished: a gateway that starts on a trajectory
// directory where a crashed one left an episode running ends it as
// abandoned (infrastructure), puts it on the finished feed, removes its
// sandboxes, and leaves finished episodes alone.
func TestRestartEndsUnfinished(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// The crashed gateway: its episodes are dropped without a Close, as
	// a SIGKILL would.
	old, err := trajectory.OpenStore(ctx, trajectory.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r, err := harness.NewRunner(harness.Config{Backend: &fake.Backend{}, Monitor: testMonitor(t), Store: old})
	if err != nil {
		t.Fatal(err)
	}
	live, err := r.Start(ctx, fakeTask, fakeHidden, harness.EpisodeMeta{ID: "crashed-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.Call(ctx, toolcall.Call{Tool: "bash", Args: []byte(`{"command":"echo hi"}`)}); err != nil {
		t.Fatal(err)
	}
	done, err := r.Start(ctx, fakeTask, fakeHidden, harness.EpisodeMeta{ID: "done-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := done.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Its death closes its files and gives up the directory's lock;
	// nothing more is written.
	old.Close()
	// A log the crash left with a corrupt line costs only itself.
	corrupt := filepath.Join(dir, "crashed-2.jsonl")
	if err := os.WriteFile(corrupt, []byte(`{"offset":0,"episode_id":"crashed-2","type":"episode_start","data":{}}`+"\n{torn\n"+
		`{"offset":2,"episode_id":"crashed-2","type":"tool_call","data":{}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	st, err := trajectory.OpenStore(ctx, trajectory.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rm := &recordingRemover{}
	srv, err := New(Config{Runner: r, Store: st, Tasks: nil, AdminToken: testAdmin, Sandboxes: rm,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(ctx) })

	var evs []trajectory.Event
	if err := st.Read(ctx, "crashed-1", 0, func(ev trajectory.Event) error { evs = append(evs, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	var end trajectory.EpisodeEnd
	if err := last.Decode(&end); err != nil || last.Type != trajectory.TypeEpisodeEnd {
		t.Fatalf("last event %s (%v), want episode_end", last.Type, err)
	}
	if end.FailureClass != trajectory.FailureInfrastructure || !strings.HasPrefix(end.Reason, harness.ReasonAbandoned+":") ||
		end.Counts.ToolCalls != 1 || end.Resolved || end.Reward != 0 {
		t.Errorf("episode_end of the crashed episode: %+v", end)
	}
	if !slices.Equal(rm.ids, []string{"crashed-1", "crashed-2"}) {
		t.Errorf("sandboxes removed for %v, want [crashed-1 crashed-2]", rm.ids)
	}
	if !strings.Contains(logs.String(), "file="+corrupt) || !strings.Contains(logs.String(), "corrupt") {
		t.Errorf("the logs do not name %s as corrupt:\n%s", corrupt, logs.String())
	}
	feed := harnesstest.Ended(t, st)
	if !slices.Contains(feed, "crashed-1") || !slices.Contains(feed, "done-1") || len(feed) != 2 {
		t.Errorf("finished feed episode_end items %v, want crashed-1 and done-1 once each", feed)
	}

	// A second start finds nothing left to end but the corrupt log,
	// still unfinished.
	rm2 := &recordingRemover{}
	srv2, err := New(Config{Runner: r, Store: st, AdminToken: testAdmin, Sandboxes: rm2})
	if err != nil {
		t.Fatal(err)
	}
	srv2.Shutdown(ctx)
	if !slices.Equal(rm2.ids, []string{"crashed-2"}) {
		t.Errorf("second start removed sandboxes of %v, want [crashed-2] (the corrupt log's) only", rm2.ids)
	}
}

// TestRestartOrphanedToken: a client whose episode a gateway restart
// ended is told so (410), not that its token is unknown; a token this
// gateway never issued is still 401.
func TestRestartOrphanedToken(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	start := func() (*Server, *trajectory.Store) {
		st, err := trajectory.OpenStore(ctx, trajectory.Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		r, err := harness.NewRunner(harness.Config{Backend: &fake.Backend{}, Monitor: testMonitor(t), Store: st})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := New(Config{Runner: r, Store: st, Tasks: []task.Task{fakeTask}, Hidden: fakeHidden, AdminToken: testAdmin})
		if err != nil {
			t.Fatal(err)
		}
		return srv, st
	}
	old, oldStore := start()
	op, err := old.Open(ctx, fakeTask, harness.EpisodeMeta{})
	if err != nil {
		t.Fatal(err)
	}
	old.Shutdown(ctx)
	oldStore.Close()

	srv, st := start()
	t.Cleanup(func() { srv.Shutdown(ctx); st.Close() })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	e := loopbackEnv(t, srv, hs, st)
	fresh := e.create()
	call := toolcall.Call{Tool: "bash", Args: []byte(`{"command":"echo x"}`)}
	tests := []struct {
		name, token string
		want        int
		msg         string
	}{
		{"token from before the restart", op.Token, http.StatusGone, "episode ended by a gateway restart"},
		{"token never issued", "rce_" + strings.Repeat("0", 64), http.StatusGone, "episode ended by a gateway restart"},
		{"this run's token, altered", fresh.Token[:len(fresh.Token)-1] + "x", http.StatusUnauthorized, "unknown token"},
		{"not a token", "nonsense", http.StatusUnauthorized, "unknown token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ae apiError
			code, _ := e.do("POST", "/v1/episodes/"+op.ID+"/calls", tc.token, call, &ae)
			if code != tc.want || !strings.HasPrefix(ae.Error, tc.msg) {
				t.Errorf("got %d %q, want %d starting %q", code, ae.Error, tc.want, tc.msg)
			}
		})
	}
}

// blockingCreates is a fake.Backend whose Create waits until released
// (or its ctx ends), then fails: sandboxes still being created when a
// gateway is killed. entered gets each Create's episode id as it starts
// waiting.
func blockingCreates(entered chan<- string, release <-chan struct{}) *fake.Backend {
	return &fake.Backend{Check: func(ctx context.Context, spec sandbox.Spec) error {
		entered <- spec.EpisodeID
		select {
		case <-release:
		case <-ctx.Done():
		}
		return errors.New("blockingCreates: not created")
	}}
}

// TestRestartAfterGroupKilledMidCreation: a gateway killed while a
// group's sandboxes were being created leaves their logs empty; the next
// start removes them (and their sandboxes) instead of leaving logs that
// hold only an episode_end.
func TestRestartAfterGroupKilledMidCreation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old, err := trajectory.OpenStore(ctx, trajectory.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan string, 3), make(chan struct{})
	r, err := harness.NewRunner(harness.Config{Backend: blockingCreates(entered, release), Monitor: testMonitor(t), Store: old})
	if err != nil {
		t.Fatal(err)
	}
	oldSrv, err := New(Config{Runner: r, Store: old, Tasks: []task.Task{fakeTask}, Hidden: fakeHidden, AdminToken: testAdmin})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(oldSrv)
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		loopbackEnv(t, oldSrv, hs, old).do("POST", "/v1/groups", testAdmin, GroupRequest{TaskID: fakeTask.ID, N: 3}, nil)
	}()
	var ids []string
	for range 3 {
		ids = append(ids, <-entered)
	}
	// The kill: nothing more reaches the logs; the directory is free.
	old.Close()
	t.Cleanup(func() {
		close(release)
		<-posted
		oldSrv.Shutdown(ctx)
		hs.Close()
	})

	st, err := trajectory.OpenStore(ctx, trajectory.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rm := &recordingRemover{}
	srv, err := New(Config{Runner: r, Store: st, AdminToken: testAdmin, Sandboxes: rm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(ctx) })
	slices.Sort(ids)
	slices.Sort(rm.ids)
	if !slices.Equal(rm.ids, ids) {
		t.Errorf("sandboxes removed for %v, want the group's %v", rm.ids, ids)
	}
	eps, err := st.Episodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range eps {
		if slices.Contains(ids, fi.ID) {
			t.Errorf("log of %s left after the restart (%d events)", fi.ID, fi.Events)
		}
	}
}
