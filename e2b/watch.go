package e2b

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/rollcage/rollcage/e2b/envd/filesystem"
	"github.com/rollcage/rollcage/sandbox"
)

// maxWatchEvents bounds the events a watcher keeps unread; the oldest go.
const maxWatchEvents = 4096

// watcher is one directory watch (WatchDir's stream or a polled
// CreateWatcher). Its events are the file effects the monitor saw of the
// sandbox's calls under the directory, delivered when each call ends.
type watcher struct {
	id        string
	dir       string
	recursive bool

	mu      sync.Mutex
	events  []*filesystem.FilesystemEvent // guarded by mu; not yet read
	changed chan struct{}                 // guarded by mu; closed and replaced on news
}

var effectTypes = map[string]filesystem.EventType{
	sandbox.EffectCreate: filesystem.EventType_EVENT_TYPE_CREATE,
	sandbox.EffectModify: filesystem.EventType_EVENT_TYPE_WRITE,
	sandbox.EffectDelete: filesystem.EventType_EVENT_TYPE_REMOVE,
	sandbox.EffectRename: filesystem.EventType_EVENT_TYPE_RENAME,
	sandbox.EffectChmod:  filesystem.EventType_EVENT_TYPE_CHMOD,
}

func (w *watcher) add(effects []sandbox.Effect) {
	var evs []*filesystem.FilesystemEvent
	for _, ef := range effects {
		rel, ok := strings.CutPrefix(ef.Path, w.dir+"/")
		if !ok || rel == "" || (!w.recursive && strings.Contains(rel, "/")) {
			continue
		}
		if t, ok := effectTypes[ef.Op]; ok {
			evs = append(evs, &filesystem.FilesystemEvent{Name: rel, Type: t})
		}
	}
	if len(evs) == 0 {
		return
	}
	w.mu.Lock()
	w.events = append(w.events, evs...)
	if n := len(w.events) - maxWatchEvents; n > 0 {
		w.events = append(w.events[:0:0], w.events[n:]...)
	}
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

// take returns the unread events and a channel closed on news.
func (w *watcher) take() ([]*filesystem.FilesystemEvent, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	evs := w.events
	w.events = nil
	return evs, w.changed
}

// notify hands a call's effects to the sandbox's watchers.
func (b *sbx) notify(effects []sandbox.Effect) {
	if len(effects) == 0 {
		return
	}
	b.mu.Lock()
	ws := make([]*watcher, 0, len(b.watchers))
	for _, w := range b.watchers {
		ws = append(ws, w)
	}
	b.mu.Unlock()
	for _, w := range ws {
		w.add(effects)
	}
}

// watch registers a watcher of dir, which must be the sandbox's
// workspace or under it (where the monitor watches file effects).
func (b *sbx) watch(dir string, recursive bool) (*watcher, error) {
	if !path.IsAbs(dir) {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("watch %q: give an absolute path", dir))
	}
	dir = path.Clean(dir)
	if dir != b.workdir && !strings.HasPrefix(dir, b.workdir+"/") {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("watch %s: rollcage watches only the workspace %s and what is under it (where the monitor sees file effects): watch a directory there, or poll with files.list", dir, b.workdir))
	}
	w := &watcher{id: "w" + randomHex(8), dir: dir, recursive: recursive, changed: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.watchers) >= 64 {
		return nil, connect.NewError(connect.CodeResourceExhausted, errors.New("64 watchers are open on this sandbox: remove some (RemoveWatcher, or end a watchDir)"))
	}
	b.watchers[w.id] = w
	return w, nil
}

func (b *sbx) unwatch(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.watchers[id]
	delete(b.watchers, id)
	return ok
}

// WatchDir streams the file effects of the sandbox's calls under the
// directory, each call's when it ends, until the client closes the
// stream.
func (f *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], st *connect.ServerStream[filesystem.WatchDirResponse]) error {
	b := sandboxOf(ctx)
	w, err := b.watch(req.Msg.Path, req.Msg.Recursive)
	if err != nil {
		return err
	}
	defer b.unwatch(w.id)
	if err := st.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	t := time.NewTicker(f.s.cfg.Keepalive)
	defer t.Stop()
	for {
		evs, changed := w.take()
		for _, ev := range evs {
			if err := st.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: ev}}); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-t.C:
			if err := st.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

func (f *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	w, err := sandboxOf(ctx).watch(req.Msg.Path, req.Msg.Recursive)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.CreateWatcherResponse{WatcherId: w.id}), nil
}

func (f *filesystemService) GetWatcherEvents(ctx context.Context, req *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	b := sandboxOf(ctx)
	b.mu.Lock()
	w := b.watchers[req.Msg.WatcherId]
	b.mu.Unlock()
	if w == nil {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no watcher %q: create one with CreateWatcher", req.Msg.WatcherId))
	}
	evs, _ := w.take()
	return connect.NewResponse(&filesystem.GetWatcherEventsResponse{Events: evs}), nil
}

func (f *filesystemService) RemoveWatcher(ctx context.Context, req *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	if !sandboxOf(ctx).unwatch(req.Msg.WatcherId) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no watcher %q", req.Msg.WatcherId))
	}
	return connect.NewResponse(&filesystem.RemoveWatcherResponse{}), nil
}
