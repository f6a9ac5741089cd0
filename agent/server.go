package agent

import (
	"bufio"
	"cmp"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// ErrLeaseExpired ends Serve when no client was heard from for the lease.
var ErrLeaseExpired = errors.New("agent lease expired")

// dedupeSize bounds the RequestID result cache.
const dedupeSize = 1024

// DefaultPath is the PATH of sessions unless the environment overrides it.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ServerConfig configures the in-container Server. The zero value runs
// commands as the agent's own user, in /workspace, with no lease, with bash
// when the image has it.
type ServerConfig struct {
	// User is "uid:gid" that commands and file reads/writes run as. Empty:
	// do not switch (tests, or an agent that is not root).
	User string
	// Workdir is where sessions start unless Configure says otherwise.
	// Empty: /workspace.
	Workdir string
	// Lease ends the server when no frame came from any client for this
	// long and no Exec is running. Zero: no lease.
	Lease time.Duration
	// Shell is "auto" (or empty: bash if present, else sh), "bash" or "sh".
	Shell string
	// ShellMode is ModePersistent (or empty: one long-lived bash per
	// session, a call costs well under a millisecond) or ModePerCall (a
	// fresh shell per call, ~8 ms). sh always runs per call.
	ShellMode string
	// Env is added to every session's environment over the defaults and
	// under Configure's Env (image environment, egress proxy variables).
	Env map[string]string
	// Nest makes a root sandbox (see nest.go): User is 0:0 inside a user
	// namespace all the policy's processes share, the agent runs as
	// NestUID beyond it. The agent must have been started by its reaper
	// with --nest.
	Nest bool
	// Logger receives lifecycle and per-call logs; nil discards them.
	Logger *slog.Logger
}

// Validate reports a config the server cannot run with.
func (c ServerConfig) Validate() error {
	if _, err := parseUser(c.User); err != nil {
		return err
	}
	switch c.Shell {
	case "", "auto", shellBash, shellSh:
	default:
		return fmt.Errorf("agent config: shell %q: use auto, bash or sh", c.Shell)
	}
	switch c.ShellMode {
	case "", ModePersistent, ModePerCall:
	default:
		return fmt.Errorf("agent config: shell mode %q: use %s or %s", c.ShellMode, ModePersistent, ModePerCall)
	}
	if c.Lease < 0 {
		return fmt.Errorf("agent config: lease %v is negative; use 0 for no lease", c.Lease)
	}
	return nil
}

func parseUser(s string) (*syscall.Credential, error) {
	if s == "" {
		return nil, nil
	}
	us, gs, ok := strings.Cut(s, ":")
	uid, err1 := strconv.ParseUint(us, 10, 32)
	gid, err2 := strconv.ParseUint(gs, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("agent config: user %q: give numeric uid:gid like 1000:1000", s)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// Server is the in-container side of the agent protocol. One Server serves
// any number of connections, one after another or at once; sessions, the
// dedupe cache and the lease are shared between them.
type Server struct {
	log  *slog.Logger
	cred *syscall.Credential
	// userThreads run file operations as cred (nil when cred is).
	userThreads *userThreads
	shell       string
	shellBin    string
	mode        string
	lease       time.Duration
	started     time.Time
	home        string
	userName    string
	nest        *nester  // a root sandbox's zygote (ServerConfig.Nest); nil otherwise
	watch       *watcher // nil until Configure asks for canaries or effects

	base   context.Context // cancelled on shutdown; parent of every call
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	err    error // set before done closes

	lastHeard atomic.Int64 // unix nanos of the last frame or finished call
	active    atomic.Int64 // calls running
	calls     sync.WaitGroup

	mu       sync.Mutex
	workdir  string                  // guarded by mu
	env      map[string]string       // guarded by mu; server Env then Configure Env
	srvEnv   map[string]string       // guarded by mu
	sessions map[string]*session     // guarded by mu
	dedupe   map[string]*dedupeEntry // guarded by mu
	lru      *list.List              // guarded by mu; finished request ids, oldest first
	pgids    map[int]bool            // guarded by mu; process groups ever started
}

type dedupeEntry struct {
	done chan struct{}
	res  sandbox.ExecResult
	err  error
	elem *list.Element
}

// NewServer checks cfg, finds the shell and starts the lease clock.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cred, _ := parseUser(cfg.User)
	shell, bin, err := findShell(cfg.Shell)
	if err != nil {
		return nil, err
	}
	if cfg.Nest {
		if cred == nil || cred.Uid != 0 {
			return nil, errors.New("agent config: a root sandbox (Nest) runs its shells as 0:0: set User to 0:0")
		}
		if err := mountNestProc(); err != nil {
			return nil, err
		}
	}
	workdir := cfg.Workdir
	if workdir == "" {
		workdir = "/workspace"
	}
	s := &Server{
		log:      log,
		cred:     cred,
		shell:    shell,
		shellBin: bin,
		mode:     cfg.ShellMode,
		lease:    cfg.Lease,
		started:  time.Now(),
		done:     make(chan struct{}),
		workdir:  workdir,
		srvEnv:   maps.Clone(cfg.Env),
		sessions: make(map[string]*session),
		dedupe:   make(map[string]*dedupeEntry),
		lru:      list.New(),
		pgids:    make(map[int]bool),
	}
	if cred != nil {
		s.userThreads = startUserThreads(cred, userThreadCount)
	}
	if cfg.Nest {
		s.nest = &nester{}
	}
	s.home, s.userName = lookupHome(cred)
	s.base, s.cancel = context.WithCancel(context.Background())
	s.lastHeard.Store(time.Now().UnixNano())
	if s.lease > 0 {
		go s.watchLease()
	}
	log.Info("agent ready", "shell", shell, "shell_mode", cmp.Or(cfg.ShellMode, ModePersistent), "shell_path", bin, "user", cfg.User, "workdir", workdir, "lease", s.lease)
	return s, nil
}

func findShell(want string) (kind, path string, err error) {
	if want == "" || want == "auto" || want == shellBash {
		for _, p := range []string{"/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"} {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return shellBash, p, nil
			}
		}
		if p, err := exec.LookPath("bash"); err == nil {
			return shellBash, p, nil
		}
		if want == shellBash {
			return "", "", errors.New("agent: shell bash not found; install bash in the image or use --shell sh")
		}
	}
	for _, p := range []string{"/bin/sh", "/usr/bin/sh"} {
		if _, err := os.Stat(p); err == nil {
			return shellSh, p, nil
		}
	}
	return "", "", errors.New("agent: no /bin/sh in the image; the sandbox needs a POSIX shell")
}

func lookupHome(cred *syscall.Credential) (home, name string) {
	uid := os.Getuid()
	if cred != nil {
		uid = int(cred.Uid)
	}
	name = strconv.Itoa(uid)
	home = "/tmp"
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = u.Username
		if u.HomeDir != "" {
			home = u.HomeDir
		}
	}
	return home, name
}

// Shell is "bash" or "sh": what sessions run in.
func (s *Server) Shell() string { return s.shell }

// Done is closed when the server shut down (Shutdown op, lease, Close).
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is why the server is done: nil for a Shutdown or Close,
// ErrLeaseExpired for the lease. Valid after Done is closed.
func (s *Server) Err() error {
	<-s.done
	return s.err
}

// Close kills every process the server started and ends it. Idempotent.
func (s *Server) Close() error {
	s.shutdown(nil)
	return nil
}

func (s *Server) shutdown(why error) {
	s.once.Do(func() {
		s.log.Info("agent shutting down", "reason", why)
		s.err = why
		s.cancel()
		s.mu.Lock()
		for pgid := range s.pgids {
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
		s.mu.Unlock()
		waitTimeout(&s.calls, 5*time.Second)
		s.mu.Lock()
		sessions := slices.Collect(maps.Values(s.sessions))
		s.mu.Unlock()
		for _, sess := range sessions {
			sess.close()
		}
		if s.watch != nil {
			s.watch.close()
		}
		if s.userThreads != nil {
			s.userThreads.close()
		}
		close(s.done)
	})
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(d):
	}
}

func (s *Server) watchLease() {
	tick := time.NewTicker(min(s.lease/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
			if s.active.Load() > 0 {
				continue
			}
			if time.Since(time.Unix(0, s.lastHeard.Load())) >= s.lease {
				s.log.Warn("no client heard from within the lease; exiting", "lease", s.lease)
				go s.shutdown(ErrLeaseExpired)
				return
			}
		}
	}
}

func (s *Server) touch() { s.lastHeard.Store(time.Now().UnixNano()) }

// Serve accepts connections on ln until the server is done or ctx is
// cancelled; it closes ln. It returns nil after a Shutdown, ErrLeaseExpired,
// or ctx's error.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	defer s.closeWhenDone(ctx, ln)()
	for {
		conn, err := ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return s.err
			default:
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("agent serve: accept: %w", err)
		}
		go func() {
			if err := s.ServeConn(ctx, conn); err != nil {
				s.log.Debug("connection ended", "err", err)
			}
		}()
	}
}

// closeWhenDone closes c once ctx is cancelled or the server is done, or
// when the caller calls the func it returns (deferred: it has returned).
func (s *Server) closeWhenDone(ctx context.Context, c io.Closer) (release func()) {
	stop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-s.done:
		case <-stop:
		}
		c.Close()
	}()
	return func() { close(stop) }
}

// ServeConn serves one connection until it breaks, the server is done or
// ctx is cancelled, and closes it. Calls still running when the connection
// breaks go on; a client that reconnects can collect them by RequestID.
func (s *Server) ServeConn(ctx context.Context, conn io.ReadWriteCloser) error {
	c := &serverConn{s: s, conn: conn, enc: json.NewEncoder(conn), inflight: make(map[uint64]context.CancelFunc), procs: make(map[uint64]*sproc),
		tunnels: make(map[uint64]*tunnelSet), gone: make(chan struct{})}
	defer s.closeWhenDone(ctx, conn)()
	defer close(c.gone)
	br := bufio.NewReaderSize(conn, 64<<10)
	for {
		line, err := readFrame(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("agent: read frame: %w", err)
		}
		s.touch()
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			c.reply(response{ID: req.ID, Error: &wireError{Code: codeBadRequest, Message: "frame is not a JSON request: " + err.Error()}})
			continue
		}
		c.dispatch(req)
	}
}

type serverConn struct {
	s    *Server
	conn io.ReadWriteCloser

	wmu sync.Mutex
	enc *json.Encoder

	mu       sync.Mutex
	inflight map[uint64]context.CancelFunc // guarded by mu; exec and file requests by id
	procs    map[uint64]*sproc             // guarded by mu; streamed commands running, by id
	tunnels  map[uint64]*tunnelSet         // guarded by mu; tunnels listening, by id
	gone     chan struct{}                 // closed when ServeConn returns: tunnels end with it
}

func (c *serverConn) reply(resp response) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.enc.Encode(resp); err != nil {
		c.s.log.Debug("reply not sent", "id", resp.ID, "err", err)
	}
}

func (c *serverConn) dispatch(req request) {
	s := c.s
	switch req.Op {
	case opPing:
		// Answered inline: a heartbeat must not wait behind anything. A
		// server that shut down says so (its connections close a moment
		// later).
		select {
		case <-s.done:
			c.reply(response{ID: req.ID, Error: &wireError{Code: codeClosed, Message: "agent is shut down"}})
			return
		default:
		}
		c.reply(response{ID: req.ID, Info: &Info{Version: Version, Shell: s.shell, PID: os.Getpid(), Uptime: time.Since(s.started)}})
		return
	case opCancel:
		c.mu.Lock()
		cancel := c.inflight[req.Target]
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		return // a cancel has no answer; the cancelled call answers
	case opTunnelData:
		// Inline, in order, never blocking: see tunnel.go.
		c.tunnelData(req)
		return
	}
	select {
	case <-s.done:
		c.reply(response{ID: req.ID, Error: &wireError{Code: codeClosed, Message: "agent is shutting down"}})
		return
	default:
	}
	ctx, cancel := context.WithCancel(s.base)
	cancellable := req.Op == opExec || req.Op == opReadFile || req.Op == opWriteFile || req.Op == opStart || req.Op == opTunnel || req.Op == opKillAll
	if cancellable {
		c.mu.Lock()
		c.inflight[req.ID] = cancel
		c.mu.Unlock()
	}
	s.calls.Add(1)
	go func() {
		defer s.calls.Done()
		defer cancel()
		var resp response
		switch req.Op {
		case opStart:
			resp = c.stream(ctx, req)
		case opTunnel:
			resp = c.tunnel(ctx, req)
		case opInput, opSignal:
			resp = c.control(req)
		default:
			resp = s.handle(ctx, req)
		}
		if cancellable {
			c.mu.Lock()
			delete(c.inflight, req.ID)
			c.mu.Unlock()
		}
		resp.ID = req.ID
		c.reply(resp)
		if req.Op == opShutdown {
			go s.shutdown(nil)
		}
	}()
}

// stream runs an opStart, sending its pid and output as they come.
func (c *serverConn) stream(ctx context.Context, req request) response {
	if req.Start == nil {
		return response{Error: &wireError{Code: codeBadRequest, Message: "start without request"}}
	}
	defer func() {
		c.mu.Lock()
		delete(c.procs, req.ID)
		c.mu.Unlock()
	}()
	res, err := c.s.startStream(ctx, *req.Start,
		func(p *sproc) {
			c.mu.Lock()
			c.procs[req.ID] = p
			c.mu.Unlock()
		},
		func(r response) {
			r.ID = req.ID
			c.reply(r)
		})
	if err != nil {
		return response{Error: toWire(err)}
	}
	if c.s.base.Err() != nil {
		return response{Error: &wireError{Code: codeClosed, Message: "agent is shutting down: the command was stopped"}}
	}
	return response{Exec: &res}
}

// control is an opInput or opSignal for a streamed command.
func (c *serverConn) control(req request) response {
	c.mu.Lock()
	p := c.procs[req.Target]
	c.mu.Unlock()
	if p == nil {
		return response{Error: &wireError{Code: codeNotFound, Message: fmt.Sprintf("no streamed command %d is running on this connection", req.Target)}}
	}
	var err error
	if req.Op == opInput {
		err = p.input(req.Data, req.CloseInput)
	} else {
		err = p.signal(syscall.Signal(req.Signal))
	}
	if err != nil {
		return response{Error: toWire(err)}
	}
	return response{}
}

// codeError is an error with a protocol code.
type codeError struct{ code, msg string }

func (e *codeError) Error() string { return e.msg }

// pathError is a file op refused for a reason of the caller's making; it
// crosses the wire as a sandbox.PathError.
type pathError struct{ kind, path, reason string }

func (e *pathError) Error() string { return e.path + ": " + e.reason }

func refuse(kind, path, format string, args ...any) error {
	return &pathError{kind, path, fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &codeError{codeBadRequest, fmt.Sprintf(format, args...)}
}

func toWire(err error) *wireError {
	var ce *codeError
	var pe *pathError
	switch {
	case errors.As(err, &ce):
		return &wireError{Code: ce.code, Message: ce.msg}
	case errors.As(err, &pe):
		code := codeRefused
		if pe.kind == sandbox.KindNotFound {
			code = codeNotFound
		}
		return &wireError{Code: code, Message: pe.reason, Kind: pe.kind, Path: pe.path}
	case errors.Is(err, fs.ErrNotExist):
		return &wireError{Code: codeNotFound, Message: err.Error()}
	case errors.Is(err, fs.ErrPermission):
		return &wireError{Code: codeBadRequest, Message: err.Error() + " (the sandbox user may not do this)"}
	default:
		return &wireError{Code: codeInternal, Message: err.Error()}
	}
}

func (s *Server) handle(ctx context.Context, req request) response {
	var resp response
	var err error
	switch req.Op {
	case opConfigure:
		if req.Config == nil {
			err = badRequest("configure without config")
			break
		}
		err = s.configure(*req.Config)
	case opExec:
		if req.Exec == nil {
			err = badRequest("exec without request")
			break
		}
		var res sandbox.ExecResult
		res, err = s.exec(ctx, *req.Exec)
		resp.Exec = &res
	case opReadFile, opWriteFile:
		if req.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, req.Timeout)
			defer cancel()
		}
		if req.Op == opReadFile {
			resp.Data, resp.Truncated, err = s.readFile(ctx, req.Path, req.Max)
		} else {
			done := s.hostWrite(req.Path)
			err = s.writeFileAs(ctx, req.User, req.Path, req.Data, fs.FileMode(req.Mode))
			done()
		}
	case opCopyIn:
		done := s.hostWrite(req.Path)
		err = s.copyIn(req.Path, req.Data)
		done()
	case opCopyOut:
		resp.Data, err = s.copyOut(req.Path)
	case opKillAll:
		ctx, cancel := context.WithTimeout(ctx, cmp.Or(req.Timeout, DefaultKillTimeout))
		defer cancel()
		var res KillResult
		if res, err = s.killAll(ctx); err == nil {
			resp.Kill = &res
		}
	case opShutdown:
	default:
		err = badRequest("unknown op %q; this agent speaks %s", req.Op, Version)
	}
	if err != nil {
		if s.base.Err() != nil {
			return response{Error: &wireError{Code: codeClosed, Message: "agent is shutting down: " + err.Error()}}
		}
		return response{Error: toWire(err)}
	}
	if req.Op == opExec && s.base.Err() != nil {
		// The command was killed because the agent shut down (the
		// sandbox is closing): that is no result of the command's.
		return response{Error: &wireError{Code: codeClosed, Message: "agent is shutting down: the command was stopped"}}
	}
	return resp
}

func (s *Server) configure(cfg Config) error {
	if cfg.Root != "" {
		if err := s.changeRoot(cfg.Root); err != nil {
			return err
		}
	}
	s.mu.Lock()
	if cfg.Workdir != "" {
		if !strings.HasPrefix(cfg.Workdir, "/") {
			s.mu.Unlock()
			return badRequest("workdir %q is not absolute; give a path like /workspace", cfg.Workdir)
		}
		s.workdir = cfg.Workdir
	}
	s.env = maps.Clone(cfg.Env)
	workdir := s.workdir
	s.mu.Unlock()

	if _, err := os.Stat(workdir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(workdir, 0o755); err != nil {
			return fmt.Errorf("create workdir: %w", err)
		}
		if s.cred != nil {
			os.Chown(workdir, int(s.cred.Uid), int(s.cred.Gid))
		}
	}
	if len(cfg.Canaries) == 0 && cfg.Watch == nil {
		return nil
	}
	s.mu.Lock()
	if s.watch == nil {
		w, err := newWatcher(s.log)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.watch = w
	}
	w := s.watch
	s.mu.Unlock()
	if err := w.plant(cfg.Canaries); err != nil {
		return err
	}
	if cfg.Watch != nil {
		return w.watchEffects(*cfg.Watch, s.home)
	}
	return nil
}

// changeRoot makes dir the agent's root, and so every later session's.
// It refuses once a session started: that session's shell would keep the
// old root.
func (s *Server) changeRoot(dir string) error {
	if !strings.HasPrefix(dir, "/") {
		return badRequest("root %q is not absolute", dir)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sessions) > 0 {
		return badRequest("root change after a session started: configure a root only on a fresh agent")
	}
	if err := syscall.Chroot(dir); err != nil {
		return fmt.Errorf("change root to %s: %w", dir, err)
	}
	if err := os.Chdir("/"); err != nil {
		return fmt.Errorf("change root to %s: cd /: %w", dir, err)
	}
	s.log.Info("root changed", "root", dir)
	return nil
}

// baseEnv is the environment of a session's first call.
func (s *Server) baseEnv() []string {
	env := map[string]string{
		"PATH":      DefaultPath,
		"HOME":      s.home,
		"USER":      s.userName,
		"LANG":      "C.UTF-8",
		"TERM":      "dumb",
		"PAGER":     "cat",
		"GIT_PAGER": "cat",
	}
	s.mu.Lock()
	maps.Copy(env, s.srvEnv)
	maps.Copy(env, s.env)
	s.mu.Unlock()
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// exec runs req once per RequestID: a retry gets the first result, and a
// retry while the first runs waits for it.
func (s *Server) exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if req.RequestID == "" {
		return s.execOnce(ctx, req)
	}
	for {
		s.mu.Lock()
		e, ok := s.dedupe[req.RequestID]
		if !ok {
			e = &dedupeEntry{done: make(chan struct{})}
			s.dedupe[req.RequestID] = e
			s.mu.Unlock()
			break
		}
		s.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return sandbox.ExecResult{}, fmt.Errorf("wait for request %s: %w", req.RequestID, ctx.Err())
		}
		if e.err == nil && e.res.Stopped != StopCancelled {
			res := e.res
			res.Replayed = true
			return res, nil
		}
		// The first attempt did not finish; this retry runs it.
	}
	res, err := s.execOnce(ctx, req)
	s.mu.Lock()
	e := s.dedupe[req.RequestID]
	e.res, e.err = res, err
	if err != nil || res.Stopped == StopCancelled {
		delete(s.dedupe, req.RequestID)
	} else {
		e.elem = s.lru.PushBack(req.RequestID)
		for s.lru.Len() > dedupeSize {
			old := s.lru.Remove(s.lru.Front()).(string)
			delete(s.dedupe, old)
		}
	}
	s.mu.Unlock()
	close(e.done)
	return res, err
}

func (s *Server) execOnce(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	name := req.Session
	if name == "" {
		name = "default"
	}
	s.mu.Lock()
	sess := s.sessions[name]
	if sess == nil {
		sess = newSession(name)
		s.sessions[name] = sess
	}
	e := execEnv{shellPath: s.shellBin, shell: s.shell, cred: s.cred, workdir: s.workdir, mode: s.mode, nest: s.nest}
	w := s.watch
	s.mu.Unlock()
	e.baseEnv = s.baseEnv()

	if err := sess.lock(ctx); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("wait for session %s: %w", name, err)
	}
	defer sess.unlock()
	s.active.Add(1)
	defer func() {
		s.touch()
		s.active.Add(-1)
	}()

	var sub *watchSub
	if w != nil && w.active() {
		sub = w.subscribe(!strings.HasPrefix(name, reservedSession) || req.Pending)
	}
	res, err := sess.run(ctx, e, req, s.trackPgid)
	if sub != nil {
		w.drain(sub)
		res.CanaryOpens, res.Effects, res.EffectsTruncated = sub.opens, sub.effects, sub.truncated
	}
	if err != nil && errors.Is(err, syscall.EAGAIN) {
		// No shell could start: the sandbox's pids limit is full. That is
		// the policy's own doing, and a shell would answer the same, so it
		// is a result the policy reads, not a failure of the agent.
		s.log.Debug("exec: no room for a shell", "session", name, "err", err)
		res.ExitCode, res.Output, res.Stopped = forkFailedExit, forkFailedOutput, ""
		res.TotalBytes, res.Truncated, res.Shell = int64(len(forkFailedOutput)), false, s.shell
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("session %s: %w", name, err)
	}
	s.log.Debug("exec", "session", name, "exit", res.ExitCode, "stopped", res.Stopped,
		"bytes", res.TotalBytes, "duration", res.Duration, "canary_opens", len(res.CanaryOpens), "effects", len(res.Effects))
	return res, nil
}

// What a call answers when no shell could be started for it because the
// sandbox's pids limit is full (bash's own words for a failed fork, and
// the exit status of a command that could not be run).
const (
	forkFailedExit   = 126
	forkFailedOutput = "bash: fork: Resource temporarily unavailable (the sandbox's process limit is full)\n"
)

// reservedSession starts the names of rollcage's own sessions (the probe,
// the tools' shell): their calls get canary opens but no effects, which
// wait for the policy's next call.
const reservedSession = "rollcage-"

// hostWrite keeps a host write's own effects out of the policy's calls.
func (s *Server) hostWrite(path string) func() {
	s.mu.Lock()
	w := s.watch
	s.mu.Unlock()
	if w == nil {
		return func() {}
	}
	return w.hostWrite(path)
}

// trackPgid remembers a process group so shutdown can kill what calls left
// running in the background.
func (s *Server) trackPgid(pgid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pgids) >= 256 {
		for g := range s.pgids {
			if syscall.Kill(-g, 0) == syscall.ESRCH {
				delete(s.pgids, g)
			}
		}
	}
	s.pgids[pgid] = true
}
