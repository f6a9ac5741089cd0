package docker

import (
	"strings"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// ptraceProbe tries PTRACE_ATTACH on every process of another uid it can
// see, and on a child of its own as a control, printing one line each:
// "<kind> <pid> <uid> <ok|errno>".
const ptraceProbe = `python3 - <<'EOF'
import ctypes, os, subprocess, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
def attach(pid):
    if libc.ptrace(16, pid, None, None) == 0:
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
        return "ok"
    return "errno%d" % ctypes.get_errno()
me = os.getuid()
for p in sorted(int(d) for d in os.listdir("/proc") if d.isdigit()):
    try:
        uid = os.stat("/proc/%d" % p).st_uid
    except FileNotFoundError:
        continue
    if uid != me:
        print("other", p, uid, attach(p))
child = subprocess.Popen(["sleep", "30"])
time.sleep(0.1)
print("own-child", child.pid, me, attach(child.pid))
child.kill()
EOF`

// TestPtraceOtherUsers: the sandbox user cannot ptrace the agent (root,
// PID 1 and its child) or any other process not its own; ptrace itself
// works (its own child, the control), so the refusals are the kernel's
// permission check, not a missing tool.
func TestPtraceOtherUsers(t *testing.T) {
	b := newTestBackend(t, Config{})
	sb := sandboxtest.Create(t, b, sandbox.Spec{Image: testImage(), EpisodeID: "ptrace"})
	defer sb.Close(t.Context())
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: ptraceProbe, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("probe exit %d: %s", res.ExitCode, res.Output)
	}
	others := 0
	for _, l := range strings.Split(strings.TrimSpace(res.Output), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			t.Fatalf("probe line %q", l)
		}
		switch f[0] {
		case "other":
			others++
			if f[3] == "ok" {
				t.Errorf("the sandbox user attached to pid %s of uid %s", f[1], f[2])
			}
		case "own-child":
			t.Logf("control: attach to own child: %s", f[3])
		}
	}
	if others < 2 {
		t.Errorf("probe saw %d processes of other users, want at least the agent's two (PID 1 and its child):\n%s", others, res.Output)
	}
}
