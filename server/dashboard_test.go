package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/trajectory"
)

// dashServer serves the dashboard under /dashboard/ over a fresh
// Store, as the gateway mounts it.
func dashServer(t *testing.T) (*httptest.Server, *trajectory.Store) {
	t.Helper()
	store, err := trajectory.OpenStore(context.Background(), trajectory.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	hub, err := trajectory.NewHub(store, trajectory.HubConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/dashboard/", http.StripPrefix("/dashboard", NewDashboard(DashboardConfig{Hub: hub, List: StoreLister(store)})))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.CloseClientConnections(); hub.Close(); srv.Close() })
	return srv, store
}

func dashAppend(t *testing.T, l *trajectory.Log, evs ...trajectory.Event) {
	t.Helper()
	for _, ev := range evs {
		if _, err := l.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
}

func dashEvent(t *testing.T, id string, step int, typ string, payload any) trajectory.Event {
	t.Helper()
	ev, err := trajectory.NewEvent(id, 0, step, typ, payload)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func dashDecision(t *testing.T, id string, step int, cmd string, hack bool) trajectory.Event {
	d := trajectory.Decision{Call: json.RawMessage(`{"tool":"bash","args":{"command":` + dashQuote(cmd) + `}}`), Action: trajectory.ActionAllow}
	if hack {
		d.Action, d.Blocked, d.Dummy, d.Hack, d.Categories = trajectory.ActionBlock, true, true, true, []string{"history_mining"}
		d.Flags = json.RawMessage(`[{"rule":"history.future_ref","category":"history_mining","severity":"certain","reason":"git show of a commit after the base commit","evidence":"e418fd0"}]`)
	}
	return dashEvent(t, id, step, trajectory.TypeDecision, d)
}

func dashQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestDashboardAPI(t *testing.T) {
	srv, store := dashServer(t)
	l, err := store.Log("ep-a")
	if err != nil {
		t.Fatal(err)
	}
	dashAppend(t, l, dashEvent(t, "ep-a", 0, trajectory.TypeEpisodeStart, trajectory.EpisodeStart{TaskID: "lru"}))
	resp, err := http.Get(srv.URL + "/dashboard/api/episodes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []EpisodeSummary
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i].Modified = time.Time{}
	}
	if d := cmp.Diff([]EpisodeSummary{{ID: "ep-a", Events: 1}}, got); d != "" {
		t.Errorf("episodes (-want +got):\n%s", d)
	}
	for _, p := range []string{"/dashboard/", "/dashboard/index.html"} {
		r, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 200 || r.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("GET %s: %d %s", p, r.StatusCode, r.Header.Get("Content-Type"))
		}
	}
	bad := httptest.NewRecorder()
	NewDashboard(DashboardConfig{}).ServeHTTP(bad, httptest.NewRequest("GET", "/", nil))
	if bad.Code != 500 {
		t.Errorf("unconfigured dashboard answered %d, want 500 with the reason", bad.Code)
	}
}

// TestDashboardInChromium loads the page in headless Chromium, checks it
// shows events already in the Store, then appends more and checks they
// stream in live over the WebSocket.
func TestDashboardInChromium(t *testing.T) {
	exe := sandboxtest.Chromium(t)
	srv, store := dashServer(t)
	l, err := store.Log("lru-0")
	if err != nil {
		t.Fatal(err)
	}
	dashAppend(t, l,
		dashEvent(t, "lru-0", 0, trajectory.TypeEpisodeStart, trajectory.EpisodeStart{TaskID: "lru"}),
		dashDecision(t, "lru-0", 1, "git log --all --oneline", false),
		dashDecision(t, "lru-0", 2, "git show e418fd0", true),
	)

	// An episode that ended before the page loaded comes from the finished
	// feed only: its decisions are not replayed.
	const longID = "roman-0-with-a-very-long-episode-identifier-that-must-wrap-instead-of-clipping-the-table-aaaaaaaaaaaaaaaaaaaa"
	l0, err := store.Log(longID)
	if err != nil {
		t.Fatal(err)
	}
	dashAppend(t, l0,
		dashEvent(t, longID, 0, trajectory.TypeEpisodeStart, trajectory.EpisodeStart{TaskID: "roman"}),
		dashDecision(t, longID, 1, "ls", false),
		dashEvent(t, longID, 1, trajectory.TypeEpisodeEnd, trajectory.EpisodeEnd{TaskID: "roman", Resolved: true, Reward: 1,
			Counts: trajectory.Counts{ToolCalls: 1}}),
	)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	rowIDs := func() string {
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](`Array.prototype.map.call(document.querySelectorAll("#episodes tbody tr"), function (tr) { return tr.dataset.id; }).join(" ")`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	text := func(id string) string {
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("`+id+`").textContent`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// waitFor polls a JS condition in the page (no sleeps in the test).
	waitFor := func(cond string) {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("waiting for %s: %v (calls %s, hacks %s)", cond, err, text("c-calls"), text("c-hacks"))
		}
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/dashboard/")); err != nil {
		t.Fatal(err)
	}
	waitFor(`document.querySelectorAll("li.decision").length === 2 && document.querySelectorAll("#episodes tbody tr").length === 2`)
	waitFor(`(document.querySelector('#tasks tr[data-task="roman"]') || {}).textContent === "roman11100%1.000"`)
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('li.decision[data-episode="`+longID+`"]').length`)); err != nil || n != 0 {
		t.Errorf("the ended episode's decisions were replayed: %d (%v)", n, err)
	}
	fits, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelector("#episodes").getBoundingClientRect().right <= document.querySelector("#episodes").parentElement.getBoundingClientRect().right + 1 && document.documentElement.scrollWidth <= window.innerWidth`))
	if err != nil || !fits {
		dims, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`JSON.stringify([document.querySelector("#episodes").getBoundingClientRect().width, document.querySelector("#episodes").parentElement.getBoundingClientRect().width, document.documentElement.scrollWidth, window.innerWidth, Array.prototype.map.call(document.querySelectorAll("#episodes tr:first-child > *"), function (c) { return c.getBoundingClientRect().width; })])`))
		t.Errorf("the episodes table is wider than its column (clipped): %v %s", err, dims)
	}
	if got := text("c-hacks"); got != "1" {
		t.Errorf("hacks = %s, want 1", got)
	}
	// The running episode is listed first, the ended one after it.
	if got := rowIDs(); got != "lru-0 "+longID {
		t.Errorf("episode rows %q, want the running lru-0 first", got)
	}
	// The long id wraps after its separators: no piece between two of
	// them spans two lines unless it alone is wider than the cell.
	wraps, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(function () {
		var td = document.querySelector('#episodes tr[data-id="`+longID+`"] td.id'), cs = getComputedStyle(td), pieces = 0, broken = [];
		var room = td.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
		var ctx = document.createElement("canvas").getContext("2d"); ctx.font = cs.font;
		td.childNodes.forEach(function (c) {
			if (c.nodeType !== 3) return;
			var r = document.createRange(); r.selectNodeContents(c);
			pieces++;
			if (r.getClientRects().length > 1 && ctx.measureText(c.textContent).width <= room) broken.push(c.textContent);
		});
		var lines = Math.round(td.getBoundingClientRect().height / parseFloat(cs.lineHeight));
		return td.textContent === "`+longID+`" && pieces > 1 && lines > 1 && broken.length === 0 ? "ok" : JSON.stringify({pieces: pieces, lines: lines, room: room, broken: broken});
	})()`))
	if err != nil || wraps != "ok" {
		t.Errorf("long id cell: %s %v; want it wrapped at separators only", wraps, err)
	}
	hackText, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("li.decision.hack").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"git show e418fd0", "history.future_ref", "HACK history_mining"} {
		if !strings.Contains(hackText, want) {
			t.Errorf("hack decision %q lacks %q", hackText, want)
		}
	}
	if got := text("c-live"); got != "1" {
		t.Errorf("in flight = %s, want 1", got)
	}

	// Live: a new decision and the episode's end stream in.
	dashAppend(t, l,
		dashDecision(t, "lru-0", 3, "python3 -m pytest -q", false),
		dashEvent(t, "lru-0", 3, trajectory.TypeEpisodeEnd, trajectory.EpisodeEnd{Resolved: true, Hacked: true, Reward: 1}),
	)
	waitFor(`document.getElementById("c-calls").textContent === "4" && document.getElementById("c-live").textContent === "0"`)
	waitFor(`(document.querySelector('#tasks tr[data-task="lru"]') || {}).textContent === "lru11100%1.001"`)
	if got := text("c-hacked-res"); got != "1" {
		t.Errorf("hacked resolutions = %s, want 1", got)
	}
	// A second episode appears without reloading the page.
	l2, err := store.Log("slugify-0")
	if err != nil {
		t.Fatal(err)
	}
	dashAppend(t, l2, dashEvent(t, "slugify-0", 0, trajectory.TypeEpisodeStart, trajectory.EpisodeStart{TaskID: "slugify"}),
		dashDecision(t, "slugify-0", 1, "ls", false))
	waitFor(`document.querySelectorAll("#episodes tbody tr").length === 3 && document.getElementById("c-calls").textContent === "5"`)
	// Running first; of the ended, the latest to end first.
	if got := rowIDs(); got != "slugify-0 lru-0 "+longID {
		t.Errorf("episode rows %q, want slugify-0 (running), lru-0, %s", got, longID)
	}
}
