package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/rollcage/rollcage/egress"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/trajectory"
)

// startEgress starts the episode's host-side egress proxy on a unix socket
// the backend mounts into the sandbox (network mode proxy). The proxy asks
// the monitor episode about every request; until that exists (the sandbox
// starts first) every request is denied.
func (e *Episode) startEgress() (string, error) {
	dir, err := os.MkdirTemp("", "rollcage-egress-")
	if err != nil {
		return "", fmt.Errorf("egress: %w", err)
	}
	sock := filepath.Join(dir, "proxy.sock")
	ln, err := egress.ListenSocket(sock)
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	policy := egress.PolicyFunc(func(ctx context.Context, req egress.Request) egress.Decision {
		if m := e.monitor(); m != nil {
			return m.Allow(ctx, req)
		}
		return egress.Decision{Reason: "episode not started"}
	})
	p, err := egress.New(egress.Config{
		EpisodeID: e.id, Policy: policy, Logger: e.log, Routes: e.routes,
		// The rules take any 127.x host for the sandbox's own, but through
		// the proxy it is the host's: only the task's hosts and the routes
		// reach it.
		CloseLoopback: true, OpenLoopback: e.task.AllowedHosts,
		CallInFlight: func() string {
			if m := e.monitor(); m != nil {
				return m.CallInFlight()
			}
			return ""
		},
		OnEvent: func(ev egress.Event) {
			e.mu.Lock()
			seg, step := e.segment, e.steps
			e.mu.Unlock()
			if err := e.emit(seg, step, trajectory.TypeNetwork, trajectory.Network{Method: ev.Method, Host: ev.Host, URL: ev.URL, Route: ev.Route,
				Allowed: ev.Allowed, Status: ev.Status, Reason: ev.Reason, Bytes: ev.BytesUp + ev.BytesDown}); err != nil {
				e.log.Warn("recording network event", "err", err)
			}
		},
	})
	if err != nil {
		ln.Close()
		os.RemoveAll(dir)
		return "", err
	}
	go func() {
		if err := p.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Warn("egress proxy stopped", "err", err)
		}
	}()
	e.egress, e.egressDir = p, dir
	return sock, nil
}

// CheckSandboxUser reports a sandbox user no backend knows, in one line.
func CheckSandboxUser(u string) error {
	switch u {
	case sandbox.UserDefault, sandbox.UserRoot:
		return nil
	}
	return fmt.Errorf("sandbox user %q: use %q (root in a user namespace) or leave it empty (uid 1000)", u, sandbox.UserRoot)
}

// CheckModelRoutes reports the first model route an episode could not
// run with (a bad URL, or the sandbox's own loopback), for callers that
// answer bad input before starting one.
func CheckModelRoutes(routes []string) error {
	_, err := parseRoutes(routes)
	return err
}

// parseRoutes parses model routes for a sandbox: besides egress.ParseRoute's
// checks, a route may not name the sandbox's own loopback, which the
// sandbox's NO_PROXY keeps off the proxy.
func parseRoutes(ss []string) ([]egress.Route, error) {
	routes, err := egress.ParseRoutes(ss)
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		if r.Host == "localhost" || r.Host == "127.0.0.1" || r.Host == "::1" {
			return nil, fmt.Errorf("model route %s: %s is the sandbox's own loopback, which never reaches the proxy: give an address the host can dial (127.0.0.2 reaches an adapter listening on all of the host's loopback)", r, r.Host)
		}
	}
	return routes, nil
}

// stopEgress closes the proxy and removes its socket directory.
func (e *Episode) stopEgress(ctx context.Context) {
	if e.egress == nil {
		return
	}
	if err := e.egress.Shutdown(ctx); err != nil {
		e.log.Warn("egress proxy shutdown", "err", err)
	}
	os.RemoveAll(e.egressDir)
	e.egress = nil
}

func (e *Episode) monitor() *monitor.EpisodeState {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mon
}
