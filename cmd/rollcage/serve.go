package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/server"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

func init() {
	register(command{Name: "serve", Summary: "the gateway for external harnesses: HTTP/WebSocket API, MCP, recording proxy, metrics", Run: runServe})
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "[--addr HOST:PORT] [--tasks FILE] [--trajectories DIR] [--policy-url URL] [judge and policy flags]", stderr)
	addr := fs.String("addr", envOr("ROLLCAGE_ADDR", "127.0.0.1:8080"), "listen address (env ROLLCAGE_ADDR)")
	tasksFile := fs.String("tasks", os.Getenv("ROLLCAGE_TASKS"), "task file (JSONL; SWE-bench-family instances too) or Harbor task or dataset directory whose tasks episodes may be created from (env ROLLCAGE_TASKS); default: the embedded demo suite")
	var loadOpts task.LoadOptions
	instanceFlags(fs, &loadOpts)
	dir := fs.String("trajectories", envOr("ROLLCAGE_TRAJECTORIES", "trajectories"), "directory of the episode logs (env ROLLCAGE_TRAJECTORIES)")
	admin := fs.String("admin-token", os.Getenv("ROLLCAGE_ADMIN_TOKEN"), "admin bearer token (env ROLLCAGE_ADMIN_TOKEN); generated and printed when empty")
	policyURL := fs.String("policy-url", os.Getenv("ROLLCAGE_POLICY_URL"), "OpenAI-compatible policy server the recording proxy forwards to, with /v1 (env ROLLCAGE_POLICY_URL)")
	tokenIDs := addTokenIDsFlag(fs)
	policyKey := fs.String("policy-api-key", os.Getenv("ROLLCAGE_POLICY_API_KEY"), "API key for the policy server (env ROLLCAGE_POLICY_API_KEY)")
	policyAuth := fs.String("policy-auth", envOr("ROLLCAGE_POLICY_AUTH", server.PolicyAuthKey), "what the proxy sends the policy server as Authorization: key (Bearer --policy-api-key) or session (Bearer <session id>, for routers that pin sessions by it)")
	publicURL := fs.String("public-url", os.Getenv("ROLLCAGE_PUBLIC_URL"), "the gateway's URL as clients reach it, for the URLs it hands out (env ROLLCAGE_PUBLIC_URL); default: from each request")
	idle := fs.Duration("idle-timeout", envDuration("ROLLCAGE_IDLE_TIMEOUT", server.DefaultIdleTimeout), "close episodes unused this long (negative: never)")
	maxSteps := fs.Int("max-steps", envInt("ROLLCAGE_MAX_STEPS", harness.DefaultMaxSteps), "tool calls per episode")
	disk := addDiskFlag(fs)
	wall := fs.Duration("wall-time", envDuration("ROLLCAGE_WALL_TIME", harness.DefaultWallTime), "wall time of an episode's agent part")
	rate := fs.Float64("rate", server.DefaultRate, "requests per second per token (negative: unlimited)")
	burst := fs.Int("burst", server.DefaultBurst, "burst of requests per token")
	stateDir := fs.String("state-dir", os.Getenv("ROLLCAGE_STATE_DIR"), "per-sandbox host directories (env ROLLCAGE_STATE_DIR); in a container it must be the same path on the host")
	pool := fs.Int("pool", envInt("ROLLCAGE_POOL", 0), "warm containers kept per task image")
	network := fs.String("network", envOr("ROLLCAGE_NETWORK", sandbox.NetworkNone), "sandbox network: none, or proxy (egress through the monitor's proxy)")
	var routes stringList
	sandboxUser := fs.String("sandbox-user", "", "root: the policy is root inside a user namespace (Docker on an engine with --userns-remap only; see docs/security-model.md); empty: uid 1000")
	fs.Var(&routes, "model-route", "a URL of the trainer's model adapter (http://HOST:PORT/PATH or https://HOST:PORT) every episode's sandbox may reach through the egress proxy; turns the proxy on (repeatable; per episode: the create request's model_routes)")
	grace := fs.Duration("shutdown-timeout", 2*time.Minute, "how long a shutdown waits for calls in flight")
	verbose := fs.Bool("v", false, "debug logs (one line per call)")
	noSeal := addSealFlag(fs)
	backendKind := addBackendFlag(fs)
	jf := addJudgeFlags(fs)
	rf := addRulesFlags(fs)
	ef := addE2BFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := harness.CheckModelRoutes(routes); err != nil {
		return fmt.Errorf("--model-route: %w", err)
	}
	if err := harness.CheckSandboxUser(*sandboxUser); err != nil {
		return fmt.Errorf("--sandbox-user: %w", err)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	// The store first: a directory another gateway or run owns is refused
	// before anything is built or started.
	store, err := trajectory.OpenStore(ctx, trajectory.Config{Dir: *dir, Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()

	var tasks []task.Task
	var hidden iofs.FS
	if *tasksFile != "" {
		tasks, hidden, err = loadTasks(ctx, *tasksFile, loadOpts, stderr)
	} else {
		tasks, hidden, err = demo.Tasks()
	}
	if err != nil {
		return err
	}
	eng, err := rf.engine(ctx, log)
	if err != nil {
		return err
	}
	mcfg := monitor.Config{Rules: eng, FailPolicy: jf.policy, Logger: log}
	if j, err := jf.build(); err != nil {
		return err
	} else if j != nil {
		mcfg.Judge = j
	}
	mon, err := monitor.New(mcfg)
	if err != nil {
		return err
	}
	poolCfg := map[string]int{}
	if *pool > 0 {
		// Warm containers are of the image episodes run: the sealed one,
		// sealed now (once; cached) by a backend without a pool.
		sealer := &dockerSealer{log: log}
		images, err := episodeImages(ctx, tasks, !*noSeal, sealer)
		sealer.close(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		for _, img := range images {
			poolCfg[img] = *pool
		}
	}
	backend, err := openBackend(ctx, backendOptions{flags: backendKind, stateDir: *stateDir, pool: poolCfg, log: log, limits: sandbox.Limits{DiskBytes: int64(*disk)}})
	if err != nil {
		return err
	}
	defer backend.Close(context.WithoutCancel(ctx))
	runner, err := harness.NewRunner(harness.Config{Backend: backend, Monitor: mon, Store: store, Network: *network, ModelRoutes: routes, SandboxUser: *sandboxUser,
		Limits: harness.Limits{MaxSteps: *maxSteps, WallTime: *wall}, Seal: !*noSeal, Logger: log})
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{
		Runner: runner, Store: store, Tasks: tasks, Hidden: hidden,
		AdminToken: *admin, PolicyURL: *policyURL, PolicyAPIKey: *policyKey, PolicyAuth: *policyAuth, TokenIDs: *tokenIDs, PublicURL: *publicURL,
		IdleTimeout: *idle, Rate: *rate, Burst: *burst, Logger: log,
		PoolStats: backend.poolStats,
		Sandboxes: backend,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick another --addr)", *addr, err)
	}
	if *admin == "" {
		fmt.Fprintf(stdout, "rollcage serve: admin token (generated; set --admin-token or ROLLCAGE_ADMIN_TOKEN to fix it): %s\n", srv.AdminToken())
	}
	fmt.Fprintf(stdout, "rollcage serve: listening on http://%s (%d tasks, trajectories in %s)\n", ln.Addr(), len(tasks), store.Dir())
	if *policyURL == "" {
		log.Info("no --policy-url: the recording proxy answers 503")
	}
	stopE2B, err := startE2B(ef, srv, stdout, log)
	if err != nil {
		ln.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing calls in flight", "timeout", *grace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *grace)
	defer cancel()
	serr := errors.Join(stopE2B(sctx), srv.Shutdown(sctx))
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		serr = errors.Join(serr, err)
	}
	return serr
}
