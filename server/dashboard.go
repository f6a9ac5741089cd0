package server

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/rollcage/rollcage/trajectory"
)

//go:embed dashboard/index.html
var dashboardHTML []byte

// EpisodeSummary is one episode as the dashboard lists it.
type EpisodeSummary struct {
	ID       string    `json:"id"`
	Events   int64     `json:"events"`
	Finished bool      `json:"finished"`
	Modified time.Time `json:"modified"`
}

// DashboardConfig configures the live dashboard.
type DashboardConfig struct {
	// Hub streams episodes' events over WebSocket. Required.
	Hub *trajectory.Hub
	// List returns the episodes to show, finished or not. Required;
	// StoreLister adapts a trajectory.Store.
	List func(ctx context.Context) ([]EpisodeSummary, error)
	// MaxEpisodes caps the episodes the page follows, newest first. Zero: 50.
	MaxEpisodes int
	Logger      *slog.Logger // nil discards
}

// Validate reports a DashboardConfig that cannot work.
func (c DashboardConfig) Validate() error {
	if c.Hub == nil || c.List == nil {
		return errors.New("dashboard: Hub and List are required: pass the gateway's trajectory.Hub and StoreLister(store)")
	}
	if c.MaxEpisodes < 0 {
		return errors.New("dashboard: MaxEpisodes must not be negative; use 0 for the default")
	}
	return nil
}

// StoreLister lists a Store's episodes for the dashboard.
func StoreLister(s *trajectory.Store) func(ctx context.Context) ([]EpisodeSummary, error) {
	return func(ctx context.Context) ([]EpisodeSummary, error) {
		infos, err := s.Episodes(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]EpisodeSummary, 0, len(infos))
		for _, in := range infos {
			if strings.HasPrefix(in.ID, "_") { // the finished feed, not an episode
				continue
			}
			out = append(out, EpisodeSummary{ID: in.ID, Events: in.Events, Finished: in.Finished, Modified: in.Modified})
		}
		return out, nil
	}
}

// NewDashboard returns the live dashboard: a self-contained page (no
// external fetches) showing episodes in flight, decisions as they stream
// in and running hack counts. Mount it under a prefix with
// http.StripPrefix; its routes are relative:
//
//	/                    the page
//	/api/episodes        JSON list of episodes, newest first
//	/ws/episodes/{id}    the episode's events (trajectory.Hub; ?from=OFFSET)
//	/ws/finished         the finished feed
//
// Authentication is the mounting gateway's job. A config that does not
// validate yields a handler that answers every request with 500 and the
// reason, so a wiring mistake shows on the first page load.
func NewDashboard(cfg DashboardConfig) http.Handler {
	if err := cfg.Validate(); err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		})
	}
	if cfg.MaxEpisodes == 0 {
		cfg.MaxEpisodes = 50
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &dashboard{cfg: cfg, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.page)
	mux.HandleFunc("GET /index.html", d.page)
	mux.HandleFunc("GET /api/episodes", d.episodes)
	mux.HandleFunc("GET /ws/episodes/{id}", func(w http.ResponseWriter, r *http.Request) {
		cfg.Hub.ServeEpisode(w, r, r.PathValue("id"))
	})
	mux.HandleFunc("GET /ws/finished", cfg.Hub.ServeFinished)
	return mux
}

type dashboard struct {
	cfg DashboardConfig
	log *slog.Logger
}

func (d *dashboard) page(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	// Everything is inline; the page may talk only to its own origin.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
	w.Write(dashboardHTML)
}

func (d *dashboard) episodes(w http.ResponseWriter, r *http.Request) {
	list, err := d.cfg.List(r.Context())
	if err != nil {
		d.log.Error("dashboard: list episodes", "err", err)
		http.Error(w, "listing episodes failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].Modified.Equal(list[j].Modified) {
			return list[i].Modified.After(list[j].Modified)
		}
		return list[i].ID < list[j].ID
	})
	if len(list) > d.cfg.MaxEpisodes {
		list = list[:d.cfg.MaxEpisodes]
	}
	if list == nil {
		list = []EpisodeSummary{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(list)
}
