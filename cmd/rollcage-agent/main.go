// Command rollcage-agent is the in-container side of rollcage: PID 1 of
// every sandbox, it runs the policy's commands in persistent shell sessions
// for the host, which talks to it over a unix socket (or stdio) with the
// protocol of package agent.
//
// Built static (CGO_ENABLED=0) and bind-mounted read-only into any image at
// /.rollcage/rollcage-agent.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/agent"
)

// Exit codes.
const (
	exitOK    = 0
	exitUsage = 2
	exitLease = 3
	exitFail  = 1
)

func main() {
	// `install DEST` copies this binary to DEST: the init container of a
	// Kubernetes sandbox pod puts the agent into a volume the task
	// image's container then runs it from.
	if len(os.Args) > 1 && os.Args[1] == "install" {
		os.Exit(install(os.Args[2:]))
	}
	// `nsinit` starts a root sandbox's shell in its namespace (see
	// agent.NestInit); the agent runs it, never PID 1.
	if len(os.Args) > 1 && os.Args[1] == "nsinit" {
		os.Exit(agent.NestInit(os.Args[2:]))
	}
	// As PID 1, stay a tiny reaper and run the real agent as a child: the
	// reaper's wait4(-1) would otherwise steal exit statuses from os/exec.
	if os.Getpid() == 1 && (len(os.Args) < 2 || os.Args[1] != "serve") {
		os.Exit(reap(os.Args[1:]))
	}
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	os.Exit(serve(args))
}

// install copies the running executable to the one path in args, mode
// 0555, written to a temporary name first so a reader never sees half.
func install(args []string) int {
	if len(args) != 1 || !strings.HasPrefix(args[0], "/") {
		fmt.Fprintln(os.Stderr, "rollcage-agent: usage: rollcage-agent install /absolute/path/rollcage-agent")
		return exitUsage
	}
	dest := args[0]
	err := func() error {
		src, err := os.Open("/proc/self/exe")
		if err != nil {
			return err
		}
		defer src.Close()
		tmp := dest + ".tmp"
		dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o555)
		if err != nil {
			return err
		}
		if _, err := io.Copy(dst, src); err != nil {
			dst.Close()
			return err
		}
		if err := dst.Close(); err != nil {
			return err
		}
		return os.Rename(tmp, dest)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rollcage-agent: install:", err)
		return exitFail
	}
	return exitOK
}

// reap starts `rollcage-agent serve args...`, forwards SIGTERM and SIGINT to
// it, reaps every orphan, and exits with the child's code.
func reap(args []string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// The reaper's main thread sits in wait4 for good, and os/signal's
	// loop holds another; idle threads reserved now let its signal relay
	// and the scheduler's hand-offs run while the policy holds every pid
	// (with two reserved, a fork bomb once made the runtime ask for an
	// eighth thread and die). One P bounds how many it can want at once.
	runtime.GOMAXPROCS(1)
	agent.ReserveThreads(4)
	if err := openRoot(); err != nil {
		log.Warn("rollcage-agent: the container's / is closed to other users", "err", err)
	}
	cmd := exec.Command("/proc/self/exe", append([]string{"serve"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	nest := slices.Contains(args, "--nest")
	if nest {
		agent.NestReaperCmd(cmd)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if err := cmd.Start(); err != nil {
		log.Error("rollcage-agent: start agent", "err", err)
		return exitFail
	}
	child := cmd.Process.Pid
	if nest {
		if err := agent.NestDropReaper(); err != nil {
			log.Error("rollcage-agent: root sandbox", "err", err)
			syscall.Kill(child, syscall.SIGKILL)
			return exitFail
		}
	}
	go func() {
		for s := range sigs {
			syscall.Kill(child, s.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			log.Error("rollcage-agent: wait", "err", err)
			return exitFail
		}
		if pid != child {
			continue // an orphan; reaping it is all we owe it
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

// openRoot makes the container's / searchable and readable by every
// user when it is not: Docker's btrfs driver with --userns-remap leaves
// a container's / at 0700, where neither the sandbox user nor a root
// sandbox's agent (uid 65535) can reach a file.
func openRoot() error {
	fi, err := os.Stat("/")
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o005 == 0o005 {
		return nil
	}
	return os.Chmod("/", fi.Mode().Perm()|0o055)
}

type options struct {
	listen      string
	stdio       bool
	socketOwner string
	user        string
	workdir     string
	lease       time.Duration
	proxyListen string
	proxySocket string
	shell       string
	shellMode   string
	logLevel    string
	nest        bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("rollcage-agent", flag.ContinueOnError)
	fs.StringVar(&o.listen, "listen", "unix:/.rollcage/run/agent.sock", "where the host connects: unix:PATH")
	fs.BoolVar(&o.stdio, "stdio", false, "serve one connection on stdin/stdout instead of --listen (attach-stream transports)")
	fs.StringVar(&o.socketOwner, "socket-owner", "", "UID:GID to own the socket, so a non-root host can connect")
	fs.StringVar(&o.user, "user", "", "UID:GID commands and file reads/writes run as (empty: do not switch)")
	fs.StringVar(&o.workdir, "workdir", "/workspace", "where sessions start")
	fs.DurationVar(&o.lease, "lease", 60*time.Second, "exit when no host was heard from for this long (0: never)")
	fs.StringVar(&o.proxyListen, "proxy-listen", "", "TCP address of the in-container egress proxy, e.g. 127.0.0.1:3128")
	fs.StringVar(&o.proxySocket, "proxy-socket", "", "unix socket of the host's proxy that --proxy-listen relays to")
	fs.StringVar(&o.shell, "shell", "auto", "auto, bash or sh")
	fs.StringVar(&o.shellMode, "shell-mode", agent.ModePersistent, "persistent (one bash per session) or percall (a fresh shell per call); sh always runs per call")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&o.nest, "nest", false, "a root sandbox: --user 0:0 inside a user namespace the policy's processes share, the agent beyond it (needs CAP_SYS_ADMIN, CAP_SETFCAP and an unmasked /proc)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q; all options are flags", fs.Arg(0))
	}
	if !o.stdio && !strings.HasPrefix(o.listen, "unix:") {
		return o, fmt.Errorf("--listen %q: give unix:/path/to/agent.sock, or use --stdio", o.listen)
	}
	if (o.proxyListen == "") != (o.proxySocket == "") {
		return o, errors.New("--proxy-listen and --proxy-socket go together; give both or neither")
	}
	return o, nil
}

func serve(args []string) int {
	o, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintln(os.Stderr, "rollcage-agent:", err)
		return exitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "rollcage-agent: --log-level %q: use debug, info, warn or error\n", o.logLevel)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// Idle threads made now, while the pids limit has room: the runtime
	// throws when it needs a thread it cannot make (see agent.ReserveThreads).
	agent.ReserveThreads(agent.SpareThreads())

	ctx, stop := notifyContext(syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	env := imageEnv()
	if o.proxyListen != "" {
		ln, err := net.Listen("tcp", o.proxyListen)
		if err != nil {
			log.Error("egress relay: listen", "addr", o.proxyListen, "err", err)
			return exitFail
		}
		go func() {
			if err := agent.Relay(ctx, ln, o.proxySocket, log); err != nil {
				log.Error("egress relay stopped", "err", err)
			}
		}()
		url := "http://" + ln.Addr().String()
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env[k] = url
		}
		env["NO_PROXY"], env["no_proxy"] = "localhost,127.0.0.1", "localhost,127.0.0.1"
	}

	srv, err := agent.NewServer(agent.ServerConfig{
		User:      o.user,
		Workdir:   o.workdir,
		Lease:     o.lease,
		Shell:     o.shell,
		ShellMode: o.shellMode,
		Nest:      o.nest,
		Env:       env,
		Logger:    log,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "rollcage-agent:", err)
		return exitUsage
	}
	defer srv.Close()

	if o.stdio {
		conn := stdio{os.Stdin, os.Stdout}
		go func() {
			if err := srv.ServeConn(ctx, conn); err != nil {
				log.Warn("stdio connection ended", "err", err)
			}
		}()
		select {
		case <-srv.Done():
		case <-ctx.Done():
		}
	} else {
		ln, err := listenUnix(strings.TrimPrefix(o.listen, "unix:"), o.socketOwner)
		if err != nil {
			log.Error("listen", "err", err)
			return exitFail
		}
		log.Info("listening", "socket", ln.Addr().String())
		err = srv.Serve(ctx, ln)
		if err != nil && !errors.Is(err, agent.ErrLeaseExpired) && ctx.Err() == nil {
			log.Error("serve", "err", err)
			return exitFail
		}
	}
	srv.Close()
	if errors.Is(srv.Err(), agent.ErrLeaseExpired) {
		return exitLease
	}
	var sig signalled
	if errors.As(context.Cause(ctx), &sig) {
		return sig.code()
	}
	return exitOK
}

// signalled is the cause of serve's context when a signal stopped it.
type signalled struct{ sig syscall.Signal }

func (s signalled) Error() string { return "stopped by " + s.sig.String() }

// code is the exit code of an agent a signal stopped: 128+n, as a shell
// reports it. An agent stopped from outside (the kubelet evicting its pod
// past the ephemeral-storage limit) must not look like a completed run:
// the kubelet keeps the reason Evicted only on a pod whose phase is
// Failed, and a pod whose containers all exit 0 is Succeeded.
func (s signalled) code() int { return 128 + int(s.sig) }

// notifyContext is signal.NotifyContext whose cause names the signal.
func notifyContext(sigs ...os.Signal) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case s := <-ch:
			cancel(signalled{s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// listenUnix listens on path with mode 0600, owned by owner ("UID:GID") if
// given. The socket's directory is the host's, mode 0700, so the sandbox
// user cannot reach the agent either way.
func listenUnix(path, owner string) (net.Listener, error) {
	os.Remove(path) // a socket left by a previous start of this container
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if owner != "" {
		us, gs, _ := strings.Cut(owner, ":")
		uid, err1 := strconv.Atoi(us)
		gid, err2 := strconv.Atoi(gs)
		if err1 != nil || err2 != nil {
			ln.Close()
			return nil, fmt.Errorf("--socket-owner %q: give numeric UID:GID like 1000:1000", owner)
		}
		if err := os.Chown(path, uid, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("chown socket: %w", err)
		}
	}
	return ln, nil
}

// imageEnv is the agent's own environment (the image's ENV) minus what is
// about the agent process rather than the sandbox user.
func imageEnv() map[string]string {
	skip := map[string]bool{"HOME": true, "USER": true, "LOGNAME": true, "PWD": true, "OLDPWD": true, "SHLVL": true, "_": true}
	env := make(map[string]string)
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if !skip[k] {
			env[k] = v
		}
	}
	return env
}

type stdio struct {
	io.Reader
	io.Writer
}

func (stdio) Close() error { return os.Stdin.Close() }
