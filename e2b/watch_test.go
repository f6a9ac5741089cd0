package e2b_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/e2b"
	"github.com/rollcage/rollcage/e2b/envd/filesystem"
)

// TestWatch: WatchDir streams, and CreateWatcher/GetWatcherEvents poll,
// the file effects of the sandbox's calls under a workspace directory.
func TestWatch(t *testing.T) {
	e := newEnv(t)
	for _, codec := range codecs {
		t.Run(codec.name, func(t *testing.T) {
			cr := e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"})
			c := e.clients(cr, codec.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dir := "/workspace/w-" + codec.name
			write := func(p string) {
				t.Helper()
				req, _ := newUpload(ctx, e.url, p, "x\n")
				resp, err := c.http.Do(req)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("upload %s: %v %v", p, resp, err)
				}
				resp.Body.Close()
			}
			st, err := c.fs.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: dir}))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if !st.Receive() || st.Msg().GetStart() == nil {
				t.Fatalf("first watch event %v, %v: want start", st.Msg(), st.Err())
			}
			w, err := c.fs.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: "/workspace", Recursive: true}))
			if err != nil {
				t.Fatal(err)
			}
			write(dir + "/sub/deep.txt") // not in the watched directory itself: the stream skips it
			write(dir + "/a.txt")
			var got []string
			for len(got) < 1 && st.Receive() {
				if ev := st.Msg().GetFilesystem(); ev != nil {
					got = append(got, ev.Type.String()+" "+ev.Name)
				}
			}
			if diff := cmp.Diff([]string{"EVENT_TYPE_CREATE a.txt"}, got); diff != "" {
				t.Errorf("watchDir events (-want +got):\n%s", diff)
			}
			write(dir + "/a.txt")
			ev, err := c.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: w.Msg.WatcherId}))
			if err != nil {
				t.Fatal(err)
			}
			got = nil
			for _, x := range ev.Msg.Events {
				got = append(got, x.Type.String()+" "+x.Name)
			}
			prefix := strings.TrimPrefix(dir, "/workspace/")
			want := []string{"EVENT_TYPE_CREATE " + prefix + "/sub/deep.txt", "EVENT_TYPE_CREATE " + prefix + "/a.txt", "EVENT_TYPE_WRITE " + prefix + "/a.txt"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("polled events (-want +got):\n%s", diff)
			}
			if _, err := c.fs.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: w.Msg.WatcherId})); err != nil {
				t.Fatal(err)
			}
			if _, err := c.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: w.Msg.WatcherId})); connect.CodeOf(err) != connect.CodeNotFound {
				t.Errorf("events of a removed watcher: %v, want not_found", err)
			}
		})
	}
}

// newUpload is an octet-stream upload of content to p.
func newUpload(ctx context.Context, url, p, content string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/files?path="+p, strings.NewReader(content))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	return req, nil
}

// TestWatchKeepalive: a WatchDir stream with nothing to report carries a
// keepalive every Config.Keepalive until the client leaves. In a
// synctest bubble on memnet: exactly three in a second at 300 ms.
func TestWatchKeepalive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvOn(t, envOptions{inMemory: true, api: func(c *e2b.Config) { c.Keepalive = 300 * time.Millisecond }})
		c := e.clients(e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := c.fs.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: "/workspace"}))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var kinds []string
		for st.Receive() {
			switch ev := st.Msg(); {
			case ev.GetStart() != nil:
				kinds = append(kinds, "start")
			case ev.GetKeepalive() != nil:
				kinds = append(kinds, "keepalive")
			default:
				kinds = append(kinds, "event")
			}
		}
		// The server ends the stream as the client's deadline passes:
		// either may be seen first.
		if err := st.Err(); err != nil && connect.CodeOf(err) != connect.CodeDeadlineExceeded {
			t.Errorf("stream ended with %v, want the client's deadline or a clean end", err)
		}
		if diff := cmp.Diff([]string{"start", "keepalive", "keepalive", "keepalive"}, kinds); diff != "" {
			t.Errorf("events in a second (-want +got):\n%s", diff)
		}
	})
}
