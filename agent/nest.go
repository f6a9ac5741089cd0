package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rollcage/rollcage/sandbox"
)

// A root sandbox (ServerConfig.Nest) gives the policy root inside a user
// namespace of its own while the agent stays beyond that root's reach:
//
//   - the agent runs as NestUID with its capabilities kept as ambient
//     ones, and its reaper (PID 1) drops to NestUID too, so no process of
//     the policy shares a uid with them;
//   - every shell of the policy starts in a new user namespace that maps
//     the container's uids 0..NestUID-1 to themselves (so root there owns
//     the image's files, and useradd, runuser and su work) and leaves
//     NestUID out, and in a new mount namespace owned by it;
//   - before the shell runs, `rollcage-agent nsinit` (run by that process
//     as root of the new namespace) puts the agent's hidepid=invisible
//     proc over /proc (the agent's and the reaper's entries are gone),
//     Docker's masks back over it, an empty read-only tmpfs over the
//     agent's run directory, drops CAP_SYS_ADMIN and CAP_SETFCAP from the
//     bounding set, and installs a seccomp filter that refuses mounts,
//     new namespaces and the kernel's other doors (nestDenied), so the
//     policy's root can neither unmount what hides the agent nor mount
//     over the watched directories.
//
// Signals and ptrace need the target's uid or a capability in the
// target's user namespace; the policy's root has neither over NestUID.

// NestUID is the agent's uid in a root sandbox: the last uid of the
// container's usual 65536, left out of the policy's user namespace.
const NestUID = 65535

// NestProcDir is where the agent mounts the proc the policy sees.
const NestProcDir = "/.rollcage/proc"

// NestRunDir is the agent's run directory, hidden from the policy.
const NestRunDir = "/.rollcage/run"

// nestCaps are the capabilities the agent of a root sandbox keeps when
// it leaves uid 0 (they must be the container's): its usual ones, plus
// SYS_ADMIN (the hidepid proc; Docker's seccomp profile lets only holders
// of it create namespaces) and SETFCAP (a user namespace that maps root).
var nestCaps = []uintptr{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_SETUID,
	unix.CAP_SETGID, unix.CAP_KILL, unix.CAP_SYS_CHROOT, unix.CAP_SYS_ADMIN,
	unix.CAP_SETFCAP,
}

// NestCaps names nestCaps as Docker does, for the backends.
var NestCaps = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL", "SYS_CHROOT", "SYS_ADMIN", "SETFCAP"}

// NestReaperCmd returns the agent's command for the reaper of a root
// sandbox: the agent as NestUID with nestCaps ambient.
func NestReaperCmd(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: NestUID, Gid: NestUID, Groups: []uint32{}},
		AmbientCaps: nestCaps,
	}
}

// NestDropReaper moves the reaper (root at PID 1) to NestUID once the
// agent runs, so the policy's root cannot signal it.
func NestDropReaper() error {
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("reaper: drop groups: %w", err)
	}
	if err := syscall.Setresgid(NestUID, NestUID, NestUID); err != nil {
		return fmt.Errorf("reaper: setgid %d: %w", NestUID, err)
	}
	if err := syscall.Setresuid(NestUID, NestUID, NestUID); err != nil {
		return fmt.Errorf("reaper: setuid %d: %w", NestUID, err)
	}
	// The uid change made the reaper undumpable, which would hide its
	// /proc/1/exe from the agent (KillAll checks it); the policy's root,
	// of another uid and user namespace, gains nothing from this.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("reaper: dumpable: %w", err)
	}
	return nil
}

// mountNestProc mounts the proc the policy's shells see: one where only
// processes the viewer may ptrace are listed (not the agent's).
func mountNestProc() error {
	if os.Getuid() != NestUID {
		return fmt.Errorf("root sandbox: the agent runs as uid %d, not %d: start it from its reaper at PID 1 with --nest", os.Getuid(), NestUID)
	}
	if err := os.MkdirAll(NestProcDir, 0o555); err != nil {
		return fmt.Errorf("root sandbox: %w", err)
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	err := unix.Mount("proc", NestProcDir, "proc", flags, "hidepid=invisible")
	if errors.Is(err, unix.EINVAL) {
		err = unix.Mount("proc", NestProcDir, "proc", flags, "hidepid=2")
	}
	if err != nil {
		return fmt.Errorf("root sandbox: mount proc at %s (the container needs CAP_SYS_ADMIN and unmasked /proc: systempaths=unconfined): %w", NestProcDir, err)
	}
	return nil
}

// nester starts the policy's processes inside one user and mount
// namespace, shared by all of them (so root sees and signals its own
// processes across sessions): through a zygote, `rollcage-agent nsinit`,
// started once in that namespace as its root. The zygote forks each
// process with CLONE_PARENT, so the process is the agent's child, which
// waits for it as for any (exec.Cmd.Wait). A zygote that died (a KillAll,
// the policy's root killing it) is started again at the next process.
type nester struct {
	mu   sync.Mutex
	conn *net.UnixConn // guarded by mu; nil until started or once dead
	zyg  *exec.Cmd     // guarded by mu
}

// spawnRequest is one process for the zygote; its files travel as
// SCM_RIGHTS in the same message, in order (stdin, stdout, stderr,
// extra files).
type spawnRequest struct {
	Path    string   `json:"path"`
	Args    []string `json:"args"`
	Env     []string `json:"env"`
	Dir     string   `json:"dir"`
	UID     uint32   `json:"uid"`
	GID     uint32   `json:"gid"`
	Groups  []uint32 `json:"groups,omitempty"`
	Setpgid bool     `json:"setpgid"`
}

type spawnReply struct {
	PID   int    `json:"pid"`
	Error string `json:"error,omitempty"`
}

// start starts cmd in the policy's namespace and sets cmd.Process, so
// that cmd.Wait works as after cmd.Start. Stdin, Stdout and Stderr must
// be *os.File or nil (/dev/null).
func (n *nester) start(cmd *exec.Cmd) error {
	if cmd.Err != nil {
		return cmd.Err
	}
	var files []*os.File
	var devnull *os.File
	for _, f := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		switch f := f.(type) {
		case nil:
			if devnull == nil {
				var err error
				if devnull, err = os.Open(os.DevNull); err != nil {
					return err
				}
				defer devnull.Close()
			}
			files = append(files, devnull)
		case *os.File:
			files = append(files, f)
		default:
			return fmt.Errorf("root sandbox: start %s: stdio must be files, not %T", cmd.Path, f)
		}
	}
	files = append(files, cmd.ExtraFiles...)
	req := spawnRequest{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir}
	if req.Env == nil {
		req.Env = os.Environ()
	}
	if a := cmd.SysProcAttr; a != nil {
		req.Setpgid = a.Setpgid
		if a.Credential != nil {
			req.UID, req.GID, req.Groups = a.Credential.Uid, a.Credential.Gid, a.Credential.Groups
		}
	}
	msg, err := json.Marshal(req)
	if err != nil {
		return err
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var reply spawnReply
	for attempt := 0; ; attempt++ {
		if n.conn == nil {
			if err := n.startZygote(); err != nil {
				return err
			}
		}
		reply, err = n.roundTrip(msg, fds)
		if err == nil || attempt > 0 {
			break
		}
		n.drop() // dead since the last process: once more with a new one
	}
	runtime.KeepAlive(files)
	if err != nil {
		n.drop()
		return fmt.Errorf("root sandbox: start %s: zygote: %w", cmd.Path, err)
	}
	if reply.Error != "" {
		return fmt.Errorf("start %s: %s", cmd.Path, reply.Error)
	}
	p, err := os.FindProcess(reply.PID)
	if err != nil {
		return fmt.Errorf("root sandbox: start %s: %w", cmd.Path, err)
	}
	cmd.Process = p
	return nil
}

func (n *nester) roundTrip(msg []byte, fds []int) (spawnReply, error) {
	var reply spawnReply
	if _, _, err := n.conn.WriteMsgUnix(msg, unix.UnixRights(fds...), nil); err != nil {
		return reply, err
	}
	buf := make([]byte, 4096)
	k, _, _, _, err := n.conn.ReadMsgUnix(buf, nil)
	if err != nil {
		return reply, err
	}
	if k == 0 {
		return reply, io.EOF
	}
	return reply, json.Unmarshal(buf[:k], &reply)
}

// drop forgets a zygote that no longer answers (and kills it).
func (n *nester) drop() {
	if n.conn != nil {
		n.conn.Close()
		n.conn = nil
	}
	if n.zyg != nil {
		n.zyg.Process.Kill()
		n.zyg = nil
	}
}

// startZygote starts the zygote in a new user and mount namespace and
// waits for it to be ready. The caller holds mu.
func (n *nester) startZygote() error {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("root sandbox: socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "zygote"), os.NewFile(uintptr(pair[1]), "zygote")
	defer theirs.Close()
	cmd := exec.Command("/proc/self/exe", "nsinit")
	cmd.Args[0] = "rollcage-agent"
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.ExtraFiles = []*os.File{theirs}
	ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: NestUID}}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: ids, GidMappings: ids, GidMappingsEnableSetgroups: true,
		Credential: &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}},
		Setsid:     true,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return fmt.Errorf("root sandbox: start the zygote: %w", err)
	}
	go cmd.Wait()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		cmd.Process.Kill()
		return fmt.Errorf("root sandbox: zygote socket: %w", err)
	}
	conn := fc.(*net.UnixConn)
	buf := make([]byte, 4096)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	k, _, _, _, err := conn.ReadMsgUnix(buf, nil)
	conn.SetReadDeadline(time.Time{})
	if err == nil && string(buf[:k]) != "ready" {
		err = errors.New(string(buf[:k]))
	}
	if err != nil {
		conn.Close()
		cmd.Process.Kill()
		return fmt.Errorf("root sandbox: the zygote did not start: %w", err)
	}
	n.conn, n.zyg = conn, cmd
	return nil
}

// startCmd is cmd.Start, or in a root sandbox the start through its
// zygote.
func startCmd(n *nester, cmd *exec.Cmd) error {
	if n == nil {
		return cmd.Start()
	}
	return n.start(cmd)
}

// Docker's masked and read-only paths under /proc, put back over the
// policy's proc (the container's own are unmasked so that a proc can be
// mounted in a user namespace at all).
var (
	nestMasked = []string{"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi"}
	nestReadOnly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// NestInit is `rollcage-agent nsinit`, the zygote of a root sandbox
// (see nester): started by the agent as root of the policy's new user
// and mount namespace with its socket at fd 3, it hides the agent,
// confines the namespace's root (bounding set, seccomp, both for all its
// threads and so every process it starts) and then starts the processes
// the agent asks for. It returns only on failure or when the agent is
// gone.
func NestInit(args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(os.Stderr, "rollcage-agent nsinit: takes no arguments (the agent runs it; not for direct use)")
		return 2
	}
	sock := os.NewFile(3, "agent")
	fc, err := net.FileConn(sock)
	sock.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rollcage-agent nsinit: fd 3 is not the agent's socket:", err)
		return 2
	}
	conn := fc.(*net.UnixConn)
	if err := nestSetup(); err != nil {
		conn.Write([]byte("rollcage-agent nsinit: " + err.Error()))
		return 126
	}
	if _, err := conn.Write([]byte("ready")); err != nil {
		return 1
	}
	buf, oob := make([]byte, 1<<20), make([]byte, unix.CmsgSpace(64*4))
	for {
		k, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil || k == 0 {
			return 0 // the agent is gone
		}
		reply := spawn(buf[:k], oob[:oobn])
		msg, _ := json.Marshal(reply)
		if _, err := conn.Write(msg); err != nil {
			return 0
		}
	}
}

// spawn starts one process for the agent, as its child (CLONE_PARENT).
func spawn(msg, oob []byte) spawnReply {
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	cmsgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return spawnReply{Error: "bad request: " + err.Error()}
	}
	for _, c := range cmsgs {
		fds, err := unix.ParseUnixRights(&c)
		if err != nil {
			return spawnReply{Error: "bad request: " + err.Error()}
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "fd"))
		}
	}
	var req spawnRequest
	if err := json.Unmarshal(msg, &req); err != nil {
		return spawnReply{Error: "bad request: " + err.Error()}
	}
	if len(files) < 3 {
		return spawnReply{Error: fmt.Sprintf("bad request: %d files, want stdin, stdout and stderr at least", len(files))}
	}
	p, err := os.StartProcess(req.Path, req.Args, &os.ProcAttr{
		Dir: req.Dir, Env: req.Env, Files: files,
		Sys: &syscall.SysProcAttr{
			Setpgid:    req.Setpgid,
			Credential: &syscall.Credential{Uid: req.UID, Gid: req.GID, Groups: append([]uint32{}, req.Groups...)},
			Cloneflags: syscall.CLONE_PARENT,
		},
	})
	if err != nil {
		return spawnReply{Error: err.Error()}
	}
	pid := p.Pid
	p.Release()
	return spawnReply{PID: pid}
}

func nestSetup() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount(NestProcDir, "/proc", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s over /proc: %w", NestProcDir, err)
	}
	for _, p := range nestMasked {
		if err := maskPath(p); err != nil {
			return err
		}
	}
	for _, p := range nestReadOnly {
		if err := readOnlyPath(p); err != nil {
			return err
		}
	}
	for _, p := range []string{NestRunDir, NestProcDir} {
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0,size=4k"); err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
	}
	// The bounding set and no_new_privs are per thread: every thread of
	// the zygote may be the one that forks. A new user namespace starts
	// with a full bounding set; the policy's root keeps nestPolicyCaps.
	last, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return fmt.Errorf("read the last capability: %w", err)
	}
	top, err := strconv.Atoi(strings.TrimSpace(string(last)))
	if err != nil {
		return fmt.Errorf("read the last capability: %w", err)
	}
	for c := uintptr(0); c <= uintptr(top); c++ {
		if slices.Contains(nestPolicyCaps, c) {
			continue
		}
		if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0); errno != 0 {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, errno)
		}
	}
	if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); errno != 0 {
		return fmt.Errorf("no_new_privs: %w", errno)
	}
	return installNestFilter()
}

func maskPath(p string) error {
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mask %s: %w", p, err)
	}
	if fi.IsDir() {
		err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0,size=4k")
	} else {
		err = unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
	}
	if err != nil {
		return fmt.Errorf("mask %s: %w", p, err)
	}
	return nil
}

func readOnlyPath(p string) error {
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", p, err)
	}
	// A remount in a user namespace must keep the flags it cannot clear.
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", p, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	if err := unix.Mount("", p, "", flags, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", p, err)
	}
	return nil
}

// nestPolicyCaps bound what the policy's root holds (in its own user
// namespace only): Docker's default set without SETFCAP, plus SYS_PTRACE
// so that root sees and debugs its processes of every uid.
var nestPolicyCaps = []uintptr{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FSETID, unix.CAP_FOWNER, unix.CAP_MKNOD,
	unix.CAP_NET_RAW, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETPCAP,
	unix.CAP_NET_BIND_SERVICE, unix.CAP_SYS_CHROOT, unix.CAP_KILL, unix.CAP_AUDIT_WRITE,
	unix.CAP_SYS_PTRACE,
}

// nestDenied are the system calls the policy's root gets EPERM for: the
// mount API (so nothing the agent hid can be uncovered and no watched
// directory mounted over), new namespaces and setns, and what reaches the
// kernel beyond a container's needs.
var nestDenied = []uintptr{
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
	unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE,
	unix.SYS_DELETE_MODULE, unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_SWAPON, unix.SYS_SWAPOFF,
	unix.SYS_REBOOT, unix.SYS_SYSLOG, unix.SYS_ACCT, unix.SYS_QUOTACTL,
}

// nestCloneFlags are the namespace flags clone may not carry.
const nestCloneFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// nestFilter is the seccomp program: a foreign architecture or ABI is
// refused, nestDenied and clone with namespace flags get EPERM, clone3
// ENOSYS (its flags are behind a pointer; libc falls back to clone).
func nestFilter() ([]unix.SockFilter, error) {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return nil, fmt.Errorf("root sandboxes are built for amd64 and arm64, not %s", runtime.GOARCH)
	}
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K

		allow  = unix.SECCOMP_RET_ALLOW
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	// Layout (BPF jumps only forward): the checks, a jump to allow, the
	// clone check, then the three returns.
	n := len(nestDenied)
	pJump := 6 + n
	pClone := pJump + 1
	pAllow, pEperm, pEnosys := pClone+3, pClone+4, pClone+5
	to := func(at, target int) uint8 { return uint8(target - at - 1) }
	prog := []unix.SockFilter{
		{Code: ld, K: 4}, // seccomp_data.arch
		{Code: jeq, K: arch, Jt: 0, Jf: to(1, pEperm)},
		{Code: ld, K: 0}, // seccomp_data.nr
		{Code: jge, K: 0x40000000, Jt: to(3, pEperm), Jf: 0}, // the x32 ABI
		{Code: jeq, K: uint32(unix.SYS_CLONE), Jt: to(4, pClone), Jf: 0},
		{Code: jeq, K: uint32(unix.SYS_CLONE3), Jt: to(5, pEnosys), Jf: 0},
	}
	for i, nr := range nestDenied {
		prog = append(prog, unix.SockFilter{Code: jeq, K: uint32(nr), Jt: to(6+i, pEperm), Jf: 0})
	}
	prog = append(prog,
		unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JA, K: uint32(pAllow - pJump - 1)},
		unix.SockFilter{Code: ld, K: 16}, // seccomp_data.args[0], low half
		unix.SockFilter{Code: jset, K: nestCloneFlags, Jt: to(pClone+1, pEperm), Jf: 0},
		unix.SockFilter{Code: ret, K: allow},
		unix.SockFilter{Code: ret, K: allow},
		unix.SockFilter{Code: ret, K: eperm},
		unix.SockFilter{Code: ret, K: enosys},
	)
	return prog, nil
}

func installNestFilter() error {
	prog, err := nestFilter()
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// TSYNC: on every thread of the zygote, so on every process it starts.
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("install the seccomp filter: %w", errno)
	}
	return nil
}

// startUser is the credentials and environment of a streamed command
// run as user (StartRequest.User): the server's own for "", else, in a
// root sandbox, the user's of the image's /etc/passwd and /etc/group.
func (s *Server) startUser(name string) (*syscall.Credential, []string, error) {
	env := s.baseEnv()
	if name == "" {
		return s.cred, env, nil
	}
	cred, home, err := s.namedCred(name)
	if err != nil {
		return nil, nil, fmt.Errorf("start as user %q: %w", name, err)
	}
	for i, kv := range env {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "HOME":
			env[i] = "HOME=" + home
		case "USER", "LOGNAME":
			env[i] = k + "=" + name
		}
	}
	return cred, env, nil
}

// namedCred is the credentials and home of the user called name in a
// root sandbox's /etc/passwd and /etc/group.
func (s *Server) namedCred(name string) (*syscall.Credential, string, error) {
	if s.nest == nil {
		return nil, "", badRequest("only a root sandbox acts as other users; this one acts as its sandbox user only")
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, "", badRequest("%v: create the user first (useradd)", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil || uid >= NestUID || gid >= NestUID {
		return nil, "", badRequest("uid %s, gid %s: a root sandbox's users have ids below %d", u.Uid, u.Gid, NestUID)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil && n < NestUID && n != gid {
				cred.Groups = append(cred.Groups, uint32(n))
			}
		}
	}
	home := u.HomeDir
	if home == "" {
		home = "/"
	}
	return cred, home, nil
}

// asNamed runs fn with the file permissions of the user called name (a
// root sandbox's), on one of the user threads switched to that user's
// fsuid and fsgid for the call and back after (no thread is made: the
// pids limit may be full); "" is asUser. Supplementary groups are not
// taken on.
func (s *Server) asNamed(name string, fn func() error) error {
	if name == "" {
		return s.asUser(fn)
	}
	cred, _, err := s.namedCred(name)
	if err != nil {
		return fmt.Errorf("as user %q: %w", name, err)
	}
	return s.asUser(func() error {
		unix.Setfsgid(int(cred.Gid))
		unix.Setfsuid(int(cred.Uid))
		defer func() {
			unix.Setfsuid(int(s.cred.Uid))
			unix.Setfsgid(int(s.cred.Gid))
		}()
		return fn()
	})
}

// nestPath refuses a file operation of a root sandbox's policy on what
// the policy's own shells cannot see: the agent's run directory and the
// agent's proc (resolved, so a link planted elsewhere does not get past).
func nestPath(p string) error {
	real := resolveExisting(p)
	for _, hidden := range []string{"/.rollcage", "/proc"} {
		if real == hidden || strings.HasPrefix(real, hidden+"/") {
			return refuse(sandbox.KindPermission, p, "Permission denied (the agent's own, hidden from the sandbox's root)")
		}
	}
	return nil
}

// resolveExisting resolves the links of the longest existing prefix of
// the absolute path p and appends the rest.
func resolveExisting(p string) string {
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			if rest == "" {
				return r
			}
			return strings.TrimSuffix(r, "/") + "/" + rest
		}
		i := strings.LastIndexByte(cur, '/')
		if i <= 0 {
			return p
		}
		if rest == "" {
			rest = cur[i+1:]
		} else {
			rest = cur[i+1:] + "/" + rest
		}
		cur = cur[:i]
	}
}
