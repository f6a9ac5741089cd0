package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// Defaults of Config.
const (
	DefaultIdleTimeout  = 30 * time.Minute
	DefaultMaxBodyBytes = 4 << 20
	DefaultMaxChatBytes = 32 << 20
	DefaultRate         = 100 // requests per second per token
	DefaultBurst        = 200
)

// PolicyAuth values.
const (
	PolicyAuthKey     = "key"
	PolicyAuthSession = "session"
)

// Runner starts episodes; *harness.Runner is one.
type Runner interface {
	Start(ctx context.Context, t task.Task, hidden fs.FS, meta harness.EpisodeMeta) (*harness.Episode, error)
}

var _ Runner = (*harness.Runner)(nil)

// SandboxRemover removes the sandboxes an episode left behind, found by
// the episode's label; *docker.Backend is one.
type SandboxRemover interface {
	RemoveEpisode(ctx context.Context, episodeID string) (int, error)
}

// Config configures a Server. Runner and Store are required; every other
// field's zero value is a working default.
type Config struct {
	// Runner starts the episodes (sandbox, monitor, trajectory log).
	Runner Runner
	// Store is the trajectory store the Runner records into; the gateway
	// reads trajectories from it and streams them.
	Store *trajectory.Store
	// Tasks can be started by id ({"task_id": ...}); Hidden is the file
	// system their (and inline tasks') HiddenTests paths are relative to.
	Tasks  []task.Task
	Hidden fs.FS
	// AdminToken lists and streams everything and acts on every episode.
	// Empty: a random one is generated (see Server.AdminToken).
	AdminToken string
	// PolicyURL is the OpenAI-compatible API (including /v1) the recording
	// proxy forwards chat completions to. Empty: the proxy answers 503.
	PolicyURL    string
	PolicyAPIKey string
	// PolicyAuth is what the proxy sends upstream as Authorization:
	// PolicyAuthKey (the default when empty) sends PolicyAPIKey;
	// PolicyAuthSession sends "Bearer <session>", the /sessions/{id} path's
	// id or else the episode id, for routers that pin sessions by it.
	PolicyAuth string
	// TokenIDs is how the proxy asks the policy server for token ids and
	// logprobs on every forwarded chat or completions request that does
	// not set the fields itself, so a harness need not:
	// trajectory.TokensVLLM (the default when ""), trajectory.TokensSGLang,
	// or trajectory.TokensOff (requests go as sent). A server that refuses
	// the fields (a 400 naming them) is asked once more without them, and
	// the episode's turns are marked tokens_unavailable.
	TokenIDs string
	// PublicURL is the gateway's address as clients reach it, used in the
	// URLs returned at episode creation. Empty: taken from each request.
	PublicURL string
	// IdleTimeout closes an episode nobody has used for this long. Zero:
	// 30m; negative: never.
	IdleTimeout time.Duration
	// MaxBodyBytes bounds a request body of the API and MCP; MaxChatBytes
	// one of the recording proxy (conversations are long). Zero: 4 MiB and
	// 32 MiB.
	MaxBodyBytes int64
	MaxChatBytes int64
	// Rate and Burst are each token's request budget (token bucket).
	// Zero: 100/s, burst 200; negative Rate: unlimited.
	Rate  float64
	Burst int
	// Sandboxes, when set, removes the sandboxes of the episodes New finds
	// unfinished in the Store (a gateway that crashed left them).
	Sandboxes SandboxRemover
	// PoolStats, when set, reports the sandbox backend's containers for
	// the metrics (alive, warm).
	PoolStats func() (alive, warm int)
	// HTTPClient talks to the policy server. Nil: a client without a
	// global timeout (streams are long); requests carry the caller's ctx.
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Validate reports a Config that cannot work, one line saying what to set.
func (c Config) Validate() error {
	var errs []error
	if c.Runner == nil {
		errs = append(errs, errors.New("server: Config.Runner is nil: pass a runner from harness.NewRunner"))
	}
	if c.Store == nil {
		errs = append(errs, errors.New("server: Config.Store is nil: pass the store the runner records into"))
	}
	if c.PolicyURL != "" {
		u, err := url.Parse(c.PolicyURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("server: PolicyURL %q: give the OpenAI-compatible API with /v1, e.g. http://127.0.0.1:8000/v1", c.PolicyURL))
		}
	}
	if _, err := trajectory.TokenFields(c.TokenIDs); err != nil {
		errs = append(errs, fmt.Errorf("server: TokenIDs: %w", err))
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("server: PublicURL %q: give the gateway's base URL, e.g. http://gateway:8080", c.PublicURL))
		}
	}
	if c.PolicyAuth != "" && c.PolicyAuth != PolicyAuthKey && c.PolicyAuth != PolicyAuthSession {
		errs = append(errs, fmt.Errorf("server: PolicyAuth %q: use %q (the API key) or %q (Bearer <session id>)", c.PolicyAuth, PolicyAuthKey, PolicyAuthSession))
	}
	if c.MaxBodyBytes < 0 || c.MaxChatBytes < 0 {
		errs = append(errs, errors.New("server: MaxBodyBytes and MaxChatBytes must not be negative: use 0 for the defaults"))
	}
	if c.Burst < 0 {
		errs = append(errs, fmt.Errorf("server: Burst %d is negative: use 0 for the default (%d)", c.Burst, DefaultBurst))
	}
	ids := map[string]bool{}
	for _, t := range c.Tasks {
		if ids[t.ID] {
			errs = append(errs, fmt.Errorf("server: task %q listed twice: task ids must be unique", t.ID))
		}
		ids[t.ID] = true
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.MaxChatBytes = cmp.Or(c.MaxChatBytes, DefaultMaxChatBytes)
	c.Rate = cmp.Or(c.Rate, DefaultRate)
	c.Burst = cmp.Or(c.Burst, DefaultBurst)
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
