package harness

import (
	"context"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox/fake"
)

// TestModelRouteRefused: a bad model route is refused with a line naming
// what to give, in the runner's Config and in an episode's meta, before
// any sandbox or log exists.
func TestModelRouteRefused(t *testing.T) {
	tests := []struct {
		route, want string
	}{
		{"ftp://adapter/v1", "give an http:// or https:// URL"},
		{"http:///v1", "no host"},
		{"http://user:secret@adapter:8000/v1", "without user:password@"},
		{"http://localhost:8000/v1", "the sandbox's own loopback"},
		{"http://127.0.0.1:8000/v1", "the sandbox's own loopback"},
	}
	b := &fake.Backend{}
	for _, tc := range tests {
		cfg := Config{Backend: b, ModelRoutes: []string{tc.route}}
		r, st := newTestRunner(t, Config{Backend: b})
		cfg.Monitor, cfg.Store = r.cfg.Monitor, st
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Config.Validate with route %q: %v, want an error with %q", tc.route, err, tc.want)
		}
		_, err := r.Start(context.Background(), fakeTask, fakeHidden, EpisodeMeta{ID: "ep-route", ModelRoutes: []string{tc.route}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start with route %q: %v, want an error with %q", tc.route, err, tc.want)
		}
		if eps, err := st.Episodes(context.Background()); err != nil || len(eps) != 0 {
			t.Errorf("Start with route %q left logs %+v (%v)", tc.route, eps, err)
		}
	}
}
