package trajectory

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// HubConfig configures a Hub. The zero value is ready to use.
type HubConfig struct {
	// PingInterval is how often an idle connection is pinged; a peer that
	// has not answered for two intervals is dropped. Zero: 30s.
	PingInterval time.Duration
	// WriteTimeout bounds every write to a subscriber; a subscriber that
	// reads nothing for this long is dropped (it resumes with ?from=).
	// Zero: 10s.
	WriteTimeout time.Duration
	// CheckOrigin is the upgrader's origin check. Nil accepts every origin:
	// authentication is the gateway's job.
	CheckOrigin func(*http.Request) bool
	// Logger: nil discards.
	Logger *slog.Logger
}

// Validate reports a HubConfig that cannot work.
func (c HubConfig) Validate() error {
	if c.PingInterval < 0 || c.WriteTimeout < 0 {
		return errors.New("trajectory hub config: PingInterval and WriteTimeout must not be negative: use 0 for the defaults")
	}
	return nil
}

// Hub streams a Store's episodes and finished feed to WebSocket
// subscribers.
//
// Every subscriber is served from the durable log, never from a buffer of
// events: it reads the file from its offset, and when it has reached the
// end it waits on a one-slot notification channel that appends fill
// without blocking (coalescing any number of appends into one wake-up).
// A slow subscriber thus costs appenders nothing and needs no memory; a
// fast one reads the newest lines from the page cache. The subscriber
// registers for notifications before its first read, so an append is
// either read or announced: the switch from catch-up to live has no gap,
// and since lines carry dense offsets there is no duplicate either.
type Hub struct {
	store    *Store
	cfg      HubConfig
	log      *slog.Logger
	upgrader websocket.Upgrader
	unwatch  func()

	mu     sync.RWMutex
	subs   map[string]map[*subscriber]struct{} // guarded by mu; by stream
	closed bool                                // guarded by mu
	done   chan struct{}                       // closed by Close
	wg     sync.WaitGroup                      // live connections
}

type subscriber struct {
	wake chan struct{} // capacity 1: coalescing notifications
}

// NewHub starts publishing store's appends.
func NewHub(store *Store, cfg HubConfig) (*Hub, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	check := cfg.CheckOrigin
	if check == nil {
		check = func(*http.Request) bool { return true }
	}
	h := &Hub{
		store:    store,
		cfg:      cfg,
		log:      lg,
		upgrader: websocket.Upgrader{CheckOrigin: check},
		subs:     map[string]map[*subscriber]struct{}{},
		done:     make(chan struct{}),
	}
	h.unwatch = store.watch(h.notify)
	return h, nil
}

// notify wakes a stream's subscribers. It never blocks.
func (h *Hub) notify(stream string) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs[stream] {
		select {
		case s.wake <- struct{}{}:
		default: // a wake-up is already pending; it covers this append too
		}
	}
}

// ServeEpisode streams one episode's events as WebSocket text messages,
// one Event JSON each, from ?from=OFFSET (default 0). After the
// episode_end event the server closes the connection normally. To resume
// after a disconnect, reconnect with from = last offset received + 1.
func (h *Hub) ServeEpisode(w http.ResponseWriter, r *http.Request, episodeID string) {
	if err := ValidID(episodeID); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.serve(w, r, episodeID)
}

// ServeFinished streams the finished feed: one message per finished
// segment (TypeSegmentEnd, Data SegmentEnd) or finished episode
// (TypeEpisodeEnd, Data the episode's EpisodeEnd), with offsets of the feed's
// own durable index, stable across restarts. It never ends by itself.
func (h *Hub) ServeFinished(w http.ResponseWriter, r *http.Request) {
	h.serve(w, r, finishedName)
}

func (h *Hub) serve(w http.ResponseWriter, r *http.Request, stream string) {
	from := int64(0)
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("bad from=%q: give the first offset wanted, a number >= 0 (last received + 1 to resume)", v), http.StatusBadRequest)
			return
		}
		from = n
	}
	info, err := h.store.info(stream)
	if errors.Is(err, ErrNotFound) {
		http.Error(w, fmt.Sprintf("episode %q not found: list episodes to find its id", stream), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, "trajectory: "+err.Error(), http.StatusInternalServerError)
		return
	}

	sub := &subscriber{wake: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		http.Error(w, "trajectory stream shutting down: reconnect later", http.StatusServiceUnavailable)
		return
	}
	// Registered before the first read of the file: see the Hub's doc.
	if h.subs[stream] == nil {
		h.subs[stream] = map[*subscriber]struct{}{}
	}
	h.subs[stream][sub] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.subs[stream], sub)
		if len(h.subs[stream]) == 0 {
			delete(h.subs, stream)
		}
		h.mu.Unlock()
		h.wg.Done()
	}()

	conn, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered the client
	}
	defer conn.Close()
	lg := h.log.With("stream", stream, "from", from)

	// The read pump handles control frames (pong) and notices the peer
	// leaving; subscribers send nothing else.
	gone := make(chan struct{})
	pongWait := 2 * h.cfg.PingInterval
	conn.SetReadLimit(4 << 10)
	_ = conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error {
		return conn.SetReadDeadline(time.Now().Add(pongWait))
	})
	go func() {
		defer close(gone)
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}()

	closeWith := func(code int, text string) {
		msg := websocket.FormatCloseMessage(code, text)
		_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(h.cfg.WriteTimeout))
	}
	if stream != finishedName && info.Finished && from >= info.Events {
		closeWith(websocket.CloseNormalClosure, "episode finished")
		return
	}

	t, err := openTail(h.store.path(stream), from)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			lg.Error("open log for streaming", "err", err)
		}
		closeWith(websocket.CloseInternalServerErr, "cannot read log")
		return
	}
	defer t.Close()
	ping := time.NewTicker(h.cfg.PingInterval)
	defer ping.Stop()
	for {
		for {
			line, hd, err := t.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				lg.Error("read log for streaming", "err", err)
				closeWith(websocket.CloseInternalServerErr, "log unreadable")
				return
			}
			_ = conn.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
			if err := conn.WriteMessage(websocket.TextMessage, line); err != nil {
				lg.Debug("subscriber write failed", "offset", hd.Offset, "err", err)
				return
			}
			if stream != finishedName && hd.Type == TypeEpisodeEnd {
				closeWith(websocket.CloseNormalClosure, "episode finished")
				return
			}
			select {
			case <-h.done:
				closeWith(websocket.CloseGoingAway, "server shutting down")
				return
			case <-gone:
				return
			default:
			}
		}
		select {
		case <-sub.wake:
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(h.cfg.WriteTimeout)); err != nil {
				return
			}
		case <-gone:
			return
		case <-h.done:
			closeWith(websocket.CloseGoingAway, "server shutting down")
			return
		}
	}
}

// Close ends every subscription with a going-away close frame and waits for
// the connections' handlers to return. Idempotent.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.done)
	h.mu.Unlock()
	h.unwatch()
	h.wg.Wait()
	return nil
}
