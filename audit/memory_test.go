package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rollcage/rollcage/internal/realcorpus"
)

// memoryLimit is what `rollcage audit` must stay within on any input
// (issue 35): the cgroup's hard limit and the peak RSS the test allows.
const memoryLimit = 512 << 20

// TestAuditMemoryBounded runs the built `rollcage audit` in a memory
// cgroup of 512 MiB on 1 GB of real trajectories (the real corpus
// copied, and a 400 MB JSONL file of its chat episodes one per line), as
// a table and as JSON, and on /dev/zero and a FIFO no one writes: each
// ends, within the cgroup and with a peak RSS of at most 512 MiB. It
// needs root to make the cgroup: elsewhere it is skipped, but fails
// under CI=true; -short skips it outside CI (it reads 2 GB).
func TestAuditMemoryBounded(t *testing.T) {
	ci := os.Getenv("CI") == "true"
	switch {
	case os.Geteuid() != 0 && ci:
		t.Fatal("needs root to make a memory cgroup; CI runs it as root")
	case os.Geteuid() != 0:
		t.Skip("needs root to make a memory cgroup")
	case testing.Short() && !ci:
		t.Skip("-short: auditing 1 GB takes a minute or more")
	}
	corpus := realcorpus.Need(t)
	bin := buildRollcage(t)
	in := filepath.Join(t.TempDir(), "in")
	episodes := writeGigabyte(t, corpus, in, 1<<30)

	fifo := filepath.Join(t.TempDir(), "pipe.jsonl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	withFIFO := filepath.Join(t.TempDir(), "dir")
	if err := os.MkdirAll(withFIFO, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(withFIFO, "pipe.jsonl"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withFIFO, "good.jsonl"), []byte(episodeLine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		args   []string
		stdout *regexp.Regexp // nil: not looked at
		stderr string         // what the error says ("": none expected)
		exits  []int          // accepted exit codes
	}{
		{"1GB table", []string{in}, regexp.MustCompile(fmt.Sprintf(`(?m)^%d episodes, \d+ tool calls`, episodes)), "", []int{0, 1}},
		{"1GB json", []string{"--json", in}, regexp.MustCompile(fmt.Sprintf(`(?m)^    "episodes": %d,$`, episodes)), "", []int{0, 1}},
		{"/dev/zero", []string{"/dev/zero"}, nil, "a character device, not a trajectory file", []int{3}},
		{"fifo", []string{fifo}, nil, "a named pipe (FIFO), not a trajectory file", []int{3}},
		{"fifo in a directory", []string{withFIFO}, regexp.MustCompile(`(?m)^1 episodes, 1 tool calls`), "", []int{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runInCgroup(t, memoryLimit, bin, append([]string{"audit"}, tc.args...)...)
			t.Logf("exit %d, peak RSS %d MiB (its runner's %d MiB), cgroup peak %d MiB (page cache with it), %d OOM kills, %.1f s",
				r.exit, r.maxRSS>>20, r.runnerRSS>>20, r.cgroupPeak>>20, r.oomKills, r.wall.Seconds())
			if r.signal != 0 || r.oomKills > 0 {
				t.Fatalf("killed by signal %d (%d OOM kills in the cgroup): over %d MiB; stderr: %s", r.signal, r.oomKills, memoryLimit>>20, tail(r.stderr))
			}
			if !slices.Contains(tc.exits, r.exit) {
				t.Errorf("exit %d, want one of %v; stderr: %s", r.exit, tc.exits, tail(r.stderr))
			}
			if r.maxRSS > memoryLimit {
				t.Errorf("peak RSS %d MiB, over the %d MiB bound", r.maxRSS>>20, memoryLimit>>20)
			}
			if tc.stdout != nil && !tc.stdout.Match(r.stdout) {
				t.Errorf("stdout does not match %s: %s", tc.stdout, tail(r.stdout))
			}
			if tc.stderr != "" && !strings.Contains(string(r.stderr), tc.stderr) {
				t.Errorf("stderr %q does not say %q", tail(r.stderr), tc.stderr)
			}
		})
	}
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// buildRollcage builds cmd/rollcage into a temporary directory.
func buildRollcage(t *testing.T) string {
	t.Helper()
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "rollcage")
	build := exec.Command("go", "build", "-o", bin, "./cmd/rollcage")
	build.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build rollcage: %v\n%s", err, out)
	}
	return bin
}

// writeGigabyte writes at least size bytes of trajectories under dir
// from the corpus: one JSONL file of about 400 MB holding the corpus's
// chat episodes ({"messages": ...} objects) one per line, and copies of
// the corpus's trajectory files for the rest. It returns how many
// episodes that is.
func writeGigabyte(t *testing.T, corpus, dir string, size int64) int {
	t.Helper()
	var files []string
	var lines [][]byte
	var corpusBytes int64
	err := filepath.WalkDir(corpus, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || skipName(d.Name()) || d.Name() == "MANIFEST.jsonl" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, p)
		corpusBytes += int64(len(data))
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) == nil && obj["messages"] != nil {
			var line bytes.Buffer
			if err := json.Compact(&line, data); err != nil {
				return err
			}
			lines = append(lines, line.Bytes())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 {
		t.Fatal("no chat episode in the corpus to make JSONL of")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// the JSONL file
	f, err := os.Create(filepath.Join(dir, "episodes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var written int64
	episodes := 0
	for i := 0; written < size*2/5; i++ {
		l := lines[i%len(lines)]
		w.Write(l)
		w.WriteByte('\n')
		written += int64(len(l)) + 1
		episodes++
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
	// copies of the corpus for the rest; a file holds one episode but
	// for the OpenHands output.jsonl files, counted by their lines
	perCopy := 0
	for _, p := range files {
		n, err := episodesIn(p)
		if err != nil {
			t.Fatal(err)
		}
		perCopy += n
	}
	for c := 0; written < size; c++ {
		for _, p := range files {
			rel, _ := filepath.Rel(corpus, p)
			dst := filepath.Join(dir, fmt.Sprintf("copy%02d", c), rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			n, err := copyFile(dst, p)
			if err != nil {
				t.Fatal(err)
			}
			written += n
		}
		episodes += perCopy
	}
	t.Logf("%d MB of trajectories: %d episodes (%d chat episodes in JSONL, copies of %d corpus files of %d MB)",
		written/1e6, episodes, len(lines), len(files), corpusBytes/1e6)
	return episodes
}

// episodesIn is how many episodes the audit reads from the corpus file p.
func episodesIn(p string) (int, error) {
	eps, errs := ReadFile(p)
	if len(errs) > 0 {
		return 0, fmt.Errorf("corpus file %s: %v", p, errs)
	}
	return len(eps), nil
}

func copyFile(dst, src string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	return n, errors.Join(err, out.Close())
}

// cgroupRun is how a process run in a memory cgroup ended.
type cgroupRun struct {
	exit, signal   int
	maxRSS         int64 // the process's peak resident set
	runnerRSS      int64 // its runner's, which bounds what maxRSS inherited
	cgroupPeak     int64 // the cgroup's peak charge, page cache included
	oomKills       int
	wall           time.Duration
	stdout, stderr []byte
}

// runInCgroup runs bin args in a new memory cgroup of limit bytes (no
// swap), made under the test's own cgroup (cgroup v1's memory hierarchy
// or v2's unified one) and removed after. A shell joins the cgroup and
// then execs bin, so that nothing of bin runs outside it.
//
// The shell is started by a small runner (this test binary again, see
// cgroupRunner), not by the test: a process started by vfork inherits
// its parent's peak RSS at exec, so bin's own would read as the test's.
func runInCgroup(t *testing.T, limit int64, bin string, args ...string) cgroupRun {
	t.Helper()
	cg := newMemoryCgroup(t, limit)
	// stdout (a JSON report of 1 GB is 150 MB) to a file, of which the
	// head and the tail are kept
	out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	rssFile := filepath.Join(t.TempDir(), "rss")
	var stderr bytes.Buffer
	cmd := exec.Command(os.Args[0], append([]string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, cg.procs, bin}, args...)...)
	cmd.Env = append(os.Environ(), cgroupRunnerEnv+"="+rssFile)
	cmd.Stdout, cmd.Stderr = out, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("rollcage %v did not end in 10 minutes", args)
	}
	r := cgroupRun{wall: time.Since(start), stdout: headTail(t, out, 64<<10), stderr: stderr.Bytes()}
	report, err := os.ReadFile(rssFile)
	if err != nil {
		t.Fatalf("the runner wrote no report (exit %v): %v; stderr: %s", cmd.ProcessState, err, tail(r.stderr))
	}
	if _, err := fmt.Sscan(string(report), &r.exit, &r.signal, &r.maxRSS, &r.runnerRSS); err != nil {
		t.Fatalf("runner's report %q: %v", report, err)
	}
	r.cgroupPeak, r.oomKills = cg.peak(), cg.ooms()
	return r
}

// cgroupRunnerEnv names the file a runner reports to: set, the test
// binary is one (TestMain).
const cgroupRunnerEnv = "ROLLCAGE_AUDIT_TEST_RUNNER_REPORT"

// cgroupRunner runs os.Args[1:] and reports to the file cgroupRunnerEnv
// names its exit code, the signal that killed it, its peak RSS and the
// runner's own, which bounds what the child's inherits; it returns the
// child's exit code.
func cgroupRunner(report string) int {
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		return 125
	}
	cmd.Wait()
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	sig := 0
	if ws.Signaled() {
		sig = int(ws.Signal())
	}
	var self syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	line := fmt.Sprintf("%d %d %d %d\n", ws.ExitStatus(), sig, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss<<10, self.Maxrss<<10)
	if err := os.WriteFile(report, []byte(line), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		return 125
	}
	return max(ws.ExitStatus(), 0)
}

// headTail is the first and the last n bytes of f.
func headTail(t *testing.T, f *os.File, n int64) []byte {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() <= 2*n {
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := make([]byte, 2*n)
	if _, err := f.ReadAt(b[:n], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(b[n:], fi.Size()-n); err != nil {
		t.Fatal(err)
	}
	return slices.Concat(b[:n], []byte("\n…\n"), b[n:])
}

// memoryCgroup is a memory cgroup made for a test.
type memoryCgroup struct {
	dir, procs string
	v2         bool
}

// newMemoryCgroup makes a memory cgroup of limit bytes without swap
// under the process's own, removed when the test ends.
func newMemoryCgroup(t *testing.T, limit int64) memoryCgroup {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var cg memoryCgroup
	var parent string
	for _, line := range strings.Split(strings.TrimSpace(string(self)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if slices.Contains(strings.Split(parts[1], ","), "memory") {
			parent = filepath.Join("/sys/fs/cgroup/memory", parts[2])
			break
		}
		if parts[0] == "0" && parts[1] == "" {
			if c, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && slices.Contains(strings.Fields(string(c)), "memory") {
				parent, cg.v2 = filepath.Join("/sys/fs/cgroup", parts[2]), true
			}
		}
	}
	if parent == "" {
		t.Fatalf("no memory cgroup controller to make a cgroup with (/proc/self/cgroup: %s)", self)
	}
	cg.dir = filepath.Join(parent, fmt.Sprintf("rollcage-audit-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Fatalf("make a memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(cg.dir); err != nil {
			t.Errorf("remove the test's cgroup: %v", err)
		}
	})
	cg.procs = filepath.Join(cg.dir, "cgroup.procs")
	set := func(file, v string) {
		if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(v), 0o644); err != nil {
			t.Fatalf("cgroup %s: %v", file, err)
		}
	}
	lim := strconv.FormatInt(limit, 10)
	if cg.v2 {
		set("memory.max", lim)
		set("memory.swap.max", "0")
		return cg
	}
	set("memory.limit_in_bytes", lim)
	if _, err := os.Stat(filepath.Join(cg.dir, "memory.memsw.limit_in_bytes")); err == nil {
		set("memory.memsw.limit_in_bytes", lim) // memory and swap together: no swap
	}
	return cg
}

// peak is the cgroup's peak charge (0 where the kernel keeps none).
func (cg memoryCgroup) peak() int64 {
	file := "memory.max_usage_in_bytes"
	if cg.v2 {
		file = "memory.peak"
	}
	b, _ := os.ReadFile(filepath.Join(cg.dir, file))
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// ooms is how many processes the kernel killed in the cgroup for memory.
func (cg memoryCgroup) ooms() int {
	file := "memory.oom_control"
	if cg.v2 {
		file = "memory.events"
	}
	b, _ := os.ReadFile(filepath.Join(cg.dir, file))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}
