package e2b

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/e2b/envd/filesystem/filesystemconnect"
	"github.com/rollcage/rollcage/e2b/envd/process/processconnect"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/server"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
)

// Episodes is the gateway's episode path the API drives; *server.Server
// is one.
type Episodes interface {
	Task(id string) (task.Task, bool)
	Tasks() []task.Task
	Open(ctx context.Context, t task.Task, meta harness.EpisodeMeta) (server.Opened, error)
	Call(ctx context.Context, id string, call toolcall.Call) (decision.CallResult, *harness.Outcome, error)
	Start(ctx context.Context, id string, call toolcall.Call, stdin bool, out func(sandbox.Output)) (*harness.Running, error)
	Submit(ctx context.Context, id, message string) (harness.Outcome, error)
	Reward(ctx context.Context, id string, x harness.External) (harness.Outcome, error)
	Standing(id string) (string, harness.Outcome, error)
	Close(ctx context.Context, id, why string) error
	State(id string) (string, *harness.Outcome, error)
	Hold(id string, until time.Time) error
	Exported(ctx context.Context, id string) (o harness.Outcome, ok bool, err error)
}

var _ Episodes = (*server.Server)(nil)

// Metadata keys rollcage reads at create.
const (
	// MetaImage names the sandbox's image when the template names none.
	MetaImage = "rollcage/image"
	// MetaTask binds the sandbox to a loaded task, so that it can be
	// graded (POST /sandboxes/{id}/rollcage/submit).
	MetaTask = "rollcage/task"
	// MetaLabel is the metadata key GET /sandboxes/{id} answers the
	// episode's label under (hacked, unconfirmed or clean), as the
	// monitor's flags stand; rollcage sets it, the client does not.
	MetaLabel = "rollcage/label"
	// MetaModelRoute lists URLs of the trainer's model adapter, comma
	// separated (http://host:port/path or https://host:port), that the
	// sandbox may reach through the egress proxy; the routes turn the
	// proxy on for the sandbox (harness.EpisodeMeta.ModelRoutes).
	MetaModelRoute = "rollcage/model_route"
	// MetaUser "root" makes the sandbox a root sandbox: every process
	// runs as root inside a user namespace, the agent beyond it
	// (harness.EpisodeMeta.SandboxUser; Docker on an engine with
	// --userns-remap only, else the create is refused saying why).
	MetaUser = "rollcage/user"
)

// Defaults of Config.
const (
	DefaultTimeout   = 300 * time.Second // E2B's default sandbox lifetime
	DefaultKeepalive = 30 * time.Second  // under the SDKs' 50 s ping interval
	DefaultRetention = 30 * time.Minute  // the gateway's default idle timeout
	// EnvdVersion is the envd version reported: >= 0.4.0 so the SDK sends
	// no user by default, >= 0.5.7 so it may upload raw octet-streams,
	// below 0.6.2 so it asks for no file metadata or watch extras.
	EnvdVersion = "0.5.7"
	envdPort    = "49983"
)

// APIKeyPattern is the key form the Python SDK accepts (JS checks none).
var APIKeyPattern = regexp.MustCompile(`^e2b_[0-9a-f]{40}$`)

// Config configures a Server. Episodes and APIKeys are required.
type Config struct {
	Episodes Episodes
	// APIKeys maps each API key (e2b_ + 40 hex) to the client it
	// authenticates; a client sees and acts on its own sandboxes only.
	APIKeys map[string]string
	// ImageKeys are further metadata keys read as the image (beside
	// MetaImage), such as the one a harness already sets.
	ImageKeys []string
	// Domain is returned to the SDK as the sandboxes' domain, for
	// deployments that route envd by host name ({port}-{id}.{domain})
	// instead of E2B_SANDBOX_URL. Empty: none.
	Domain string
	// Keepalive is the interval of keepalive events on process streams.
	// Zero: 30s.
	Keepalive time.Duration
	// Retention is how long a sandbox's labels stay readable after it
	// ended (GET /sandboxes/{id}/rollcage/labels), while the gateway
	// still holds its episode. Zero: 30 minutes.
	Retention time.Duration
	Logger    *slog.Logger
}

// Validate reports a Config that cannot work, one line per problem.
func (c Config) Validate() error {
	var errs []error
	if c.Episodes == nil {
		errs = append(errs, errors.New("e2b: Config.Episodes is nil: pass the gateway (server.New)"))
	}
	if len(c.APIKeys) == 0 {
		errs = append(errs, errors.New("e2b: no API keys: give at least one (e2b_ + 40 hex, see NewAPIKey)"))
	}
	for k := range c.APIKeys {
		if !APIKeyPattern.MatchString(k) {
			errs = append(errs, fmt.Errorf("e2b: API key %q: must be e2b_ followed by 40 lowercase hex digits (the form the Python SDK accepts)", k))
		}
	}
	return errors.Join(errs...)
}

// NewAPIKey returns a random key of the accepted form.
func NewAPIKey() string { return "e2b_" + randomHex(20) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Server serves the E2B API. It is an http.Handler; Close stops its
// timeout reaper and kills the sandboxes still open.
type Server struct {
	cfg     Config
	log     *slog.Logger
	control *http.ServeMux
	envd    http.Handler
	keys    map[[32]byte]string // sha256(key) → client

	mu        sync.Mutex
	sandboxes map[string]*sbx // guarded by mu; by sandbox (= episode) id
	// ended holds the sandboxes that ended, for Config.Retention: their
	// labels stay readable by their client.
	ended map[string]endedSbx // guarded by mu

	stop     chan struct{}
	reapDone chan struct{}
	once     sync.Once
}

// New returns a Server and starts its timeout reaper.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = DefaultKeepalive
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, keys: map[[32]byte]string{}, sandboxes: map[string]*sbx{}, ended: map[string]endedSbx{},
		stop: make(chan struct{}), reapDone: make(chan struct{})}
	for k, client := range cfg.APIKeys {
		s.keys[sha256.Sum256([]byte(k))] = client
	}
	s.routeControl()
	s.routeEnvd()
	go s.reapLoop()
	return s, nil
}

// Close stops the reaper and kills every sandbox still open (their
// episodes closed as abandoned).
func (s *Server) Close(ctx context.Context) error {
	s.once.Do(func() { close(s.stop) })
	<-s.reapDone
	s.mu.Lock()
	open := make([]*sbx, 0, len(s.sandboxes))
	for _, b := range s.sandboxes {
		open = append(open, b)
	}
	s.sandboxes = map[string]*sbx{}
	s.mu.Unlock()
	var errs []error
	for _, b := range open {
		if err := s.kill(ctx, b, "e2b server closed"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// hostRE matches the host name the SDK builds for envd without
// E2B_SANDBOX_URL: {port}-{sandboxID}.{domain}.
var hostRE = regexp.MustCompile(`^([0-9]+)-([a-z0-9]+)\.`)

// ServeHTTP routes envd traffic (by the E2b-Sandbox-Id header or the
// host name) and the control plane; their paths do not collide.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The muxes would redirect a path with a '.', '..' or empty segment
	// to its clean form, in HTML.
	if !server.CleanPath(r.URL.Path) {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("path %q has an empty, '.' or '..' segment: sandbox ids are letters and digits", r.URL.Path))
		return
	}
	if id := sandboxIDOf(r); id != "" || isEnvdPath(r.URL.Path) {
		s.envd.ServeHTTP(w, r)
		return
	}
	s.control.ServeHTTP(w, r)
}

func sandboxIDOf(r *http.Request) string {
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		return id
	}
	if m := hostRE.FindStringSubmatch(r.Host); m != nil {
		return m[2]
	}
	return ""
}

func isEnvdPath(p string) bool {
	return strings.HasPrefix(p, "/"+processconnect.ProcessName+"/") ||
		strings.HasPrefix(p, "/"+filesystemconnect.FilesystemName+"/") ||
		p == "/files" || p == "/health"
}

// client authenticates a control-plane request by its X-API-KEY.
func (s *Server) client(r *http.Request) (string, bool) {
	k := r.Header.Get("X-API-KEY")
	if k == "" {
		return "", false
	}
	h := sha256.Sum256([]byte(k))
	c, ok := s.keys[h]
	return c, ok
}

// endedSbx is a sandbox that ended: whose it was, and when.
type endedSbx struct {
	client string
	at     time.Time
}

// sbx is one E2B sandbox: an episode and what E2B says about it.
type sbx struct {
	id       string
	client   string
	template string
	taskID   string
	bound    bool // created for a task: may be graded
	image    string
	workdir  string // the task's: where file effects are watched
	metadata map[string]string
	envs     map[string]string
	token    string
	started  time.Time
	deadline time.Time // the episode's wall-time limit: no E2B timeout outlives it

	mu       sync.Mutex
	endAt    time.Time           // guarded by mu
	killed   bool                // guarded by mu
	nextPID  uint32              // guarded by mu; processes started, for request ids and the pids of calls that run nothing
	procs    map[uint32]*proc    // guarded by mu; running processes by pid
	tags     map[string]bool     // guarded by mu; tags of running (or starting) processes
	watchers map[string]*watcher // guarded by mu; by id
}

// overWall says why a sandbox lifetime ending at end is refused: it
// outlives the episode's wall-time limit (deadline), past which no call
// runs. "" when it fits, allowing a second for the whole seconds E2B
// clients give.
func overWall(deadline, end time.Time) string {
	if deadline.IsZero() || !end.After(deadline.Add(time.Second)) {
		return ""
	}
	left := max(time.Until(deadline), 0).Truncate(time.Second)
	return fmt.Sprintf("timeout %d s outlives the episode's wall-time limit (rollcage serve --wall-time), which ends in %d s: give at most %d s, or raise --wall-time",
		int(time.Until(end).Round(time.Second).Seconds()), int(left.Seconds()), int(left.Seconds()))
}

// setEnd sets b's end, never past the episode's wall time (calls after
// it would fail; the sandbox ends instead), and holds the episode off the
// gateway's idle reaper until then: an E2B sandbox lives for its timeout
// however idle it is. extend only moves the end later (connect's rule).
func (s *Server) setEnd(b *sbx, end time.Time, extend bool) {
	if !b.deadline.IsZero() && end.After(b.deadline) {
		end = b.deadline
	}
	b.mu.Lock()
	if !extend || end.After(b.endAt) {
		b.endAt = end
	}
	end = b.endAt
	b.mu.Unlock()
	if err := s.cfg.Episodes.Hold(b.id, end); err != nil {
		s.log.Debug("holding a sandbox's episode", "sandbox_id", b.id, "err", err)
	}
}

func (b *sbx) end() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.endAt
}

func (b *sbx) tokenOK(tok string) bool {
	return subtle.ConstantTimeCompare([]byte(tok), []byte(b.token)) == 1
}

// lookup returns client's sandbox id, or nil (another client's sandbox is
// as unknown as a missing one).
func (s *Server) lookup(client, id string) *sbx {
	s.mu.Lock()
	b := s.sandboxes[id]
	s.mu.Unlock()
	if b == nil || (client != "" && b.client != client) {
		return nil
	}
	if st, _, err := s.cfg.Episodes.State(id); err != nil || st != server.StateRunning {
		// Closed behind our back (the gateway's idle reaper, a limit,
		// DELETE /v1/episodes/{id}): gone for E2B too.
		s.forget(b)
		return nil
	}
	return b
}

func (s *Server) forget(b *sbx) {
	s.mu.Lock()
	if s.sandboxes[b.id] == b {
		delete(s.sandboxes, b.id)
		s.ended[b.id] = endedSbx{client: b.client, at: time.Now()}
	}
	s.mu.Unlock()
	b.mu.Lock()
	b.killed = true
	procs := b.procs
	b.procs = map[uint32]*proc{}
	b.mu.Unlock()
	for _, p := range procs {
		if err := p.signal(context.Background(), syscall.SIGKILL); err != nil && !errors.Is(err, sandbox.ErrClosed) {
			s.log.Debug("killing a process of a killed sandbox", "sandbox_id", b.id, "pid", p.pid, "err", err)
		}
	}
}

// kill closes b's episode without grading and forgets it.
func (s *Server) kill(ctx context.Context, b *sbx, why string) error {
	s.forget(b)
	err := s.cfg.Episodes.Close(ctx, b.id, why)
	if errors.Is(err, server.ErrUnknownEpisode) {
		err = nil
	}
	s.log.Info("e2b sandbox killed", "sandbox_id", b.id, "why", why)
	if err != nil {
		return fmt.Errorf("e2b: kill %s: %w", b.id, err)
	}
	return nil
}

// reapLoop kills sandboxes past their timeout until Close.
func (s *Server) reapLoop() {
	defer close(s.reapDone)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.reap(now)
		}
	}
}

// reap kills the sandboxes past their end. The others' episodes are held
// off the gateway's idle reaper until their end (setEnd).
func (s *Server) reap(now time.Time) {
	var due []*sbx
	s.mu.Lock()
	for _, b := range s.sandboxes {
		if !now.Before(b.end()) {
			due = append(due, b)
		}
	}
	for id, g := range s.ended {
		if now.Sub(g.at) > s.cfg.Retention {
			delete(s.ended, id)
		}
	}
	s.mu.Unlock()
	for _, b := range due {
		if err := s.kill(context.Background(), b, "e2b timeout"); err != nil {
			s.log.Warn("killing timed-out sandbox", "sandbox_id", b.id, "err", err)
		}
	}
}
