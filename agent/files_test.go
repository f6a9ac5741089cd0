package agent

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/rollcage/rollcage/sandbox"
)

// openDir makes a temp dir the unprivileged user can enter.
func openDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestAsNonRootUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	d := openDir(t)
	userDir := filepath.Join(d, "user")
	rootDir := filepath.Join(d, "root")
	os.Mkdir(userDir, 0o755)
	os.Chown(userDir, 65534, 65534)
	os.Mkdir(rootDir, 0o755)
	os.WriteFile(filepath.Join(rootDir, "secret"), []byte("s3cret"), 0o600)
	os.WriteFile(filepath.Join(rootDir, "public"), []byte("hello"), 0o644)

	_, c := newTestServer(t, ServerConfig{User: "65534:65534", Workdir: userDir})
	ctx := t.Context()

	res := run(t, c, "", "id -u; id -g; id -G; pwd; cat "+rootDir+"/secret")
	if res.Output != "65534\n65534\n65534\n"+userDir+"\ncat: "+rootDir+"/secret: Permission denied\n" {
		t.Errorf("exec as user: %q", res.Output)
	}

	tests := []struct {
		name    string
		do      func() error
		wantErr error
	}{
		{"write own dir", func() error { return c.WriteFile(ctx, userDir+"/a/b.txt", []byte("x"), 0o640) }, nil},
		{"write root dir", func() error { return c.WriteFile(ctx, rootDir+"/x", []byte("x"), 0) }, sandbox.ErrRefused},
		{"read public", func() error { _, _, err := c.ReadFile(ctx, rootDir+"/public", 0); return err }, nil},
		{"read secret", func() error { _, _, err := c.ReadFile(ctx, rootDir+"/secret", 0); return err }, sandbox.ErrRefused},
		{"read missing", func() error { _, _, err := c.ReadFile(ctx, userDir+"/nope", 0); return err }, sandbox.ErrNotFound},
	}
	for _, tc := range tests {
		err := tc.do()
		if (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.wantErr)
		}
	}
	fi, err := os.Stat(userDir + "/a/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 65534 || st.Gid != 65534 || fi.Mode().Perm() != 0o640 {
		t.Errorf("written file: uid %d gid %d mode %v", st.Uid, st.Gid, fi.Mode())
	}
	// The agent's own threads kept root: a root-only read still works here.
	if _, err := os.ReadFile(filepath.Join(rootDir, "secret")); err != nil {
		t.Errorf("test process lost root: %v", err)
	}
}

func TestReadFileCap(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	c.WriteFile(t.Context(), d+"/f", []byte("0123456789"), 0)
	tests := []struct {
		max   int64
		want  string
		trunc bool
	}{
		{0, "0123456789", false},
		{10, "0123456789", false},
		{4, "0123", true},
	}
	for _, tc := range tests {
		data, trunc, err := c.ReadFile(t.Context(), d+"/f", tc.max)
		if err != nil || string(data) != tc.want || trunc != tc.trunc {
			t.Errorf("max %d: %q %v %v", tc.max, data, trunc, err)
		}
	}
	if _, _, err := c.ReadFile(t.Context(), "relative", 0); !errors.Is(err, sandbox.ErrAgent) {
		t.Errorf("relative path: %v", err)
	}
}

func TestCopyInOut(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	files := map[string]string{"tests/test_a.py": "assert 1", "tests/data/x.txt": "x", "../escape.txt": "e"}
	for _, name := range []string{"tests/test_a.py", "tests/data/x.txt", "../escape.txt"} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o640, Size: int64(len(files[name])), Uid: 123, Gid: 456, Typeflag: tar.TypeReg})
		tw.Write([]byte(files[name]))
	}
	tw.Close()
	if err := c.CopyIn(t.Context(), d+"/dst", &in); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(d + "/dst/tests/test_a.py")
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 123 || st.Gid != 456 || fi.Mode().Perm() != 0o640 {
		t.Errorf("owner %d:%d mode %v", st.Uid, st.Gid, fi.Mode())
	}
	if _, err := os.Stat(d + "/dst/escape.txt"); err != nil {
		t.Errorf("../ entry not kept inside: %v", err)
	}

	rc, err := c.CopyOut(t.Context(), d+"/dst/tests")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	want := map[string]string{"tests/": "", "tests/data/": "", "tests/data/x.txt": "x", "tests/test_a.py": "assert 1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("copy out (-want +got):\n%s", diff)
	}
	if _, err := c.CopyOut(t.Context(), d+"/missing"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("copy out missing: %v", err)
	}
}

func TestCanaryOpens(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	canaries := []sandbox.Canary{
		{Path: d + "/secrets/answer.key", Content: "42"},
		{Path: d + "/other/token", Content: "t"},
	}
	if err := c.Configure(t.Context(), Config{Canaries: canaries}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(canaries[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm() != 0o644 {
		t.Errorf("canary owner %d mode %v", st.Uid, fi.Mode())
	}
	steps := []struct {
		cmd  string
		want []string
	}{
		{"true", nil}, // planting is not an open
		{"cat " + canaries[0].Path + " " + canaries[0].Path + "; ls " + d + "/other", []string{canaries[0].Path}},
		{"echo nothing", nil},
		{"head -c1 " + canaries[1].Path + " >/dev/null; cat " + canaries[0].Path, []string{canaries[1].Path, canaries[0].Path}},
	}
	for i, s := range steps {
		res := run(t, c, "", s.cmd)
		if diff := cmp.Diff(s.want, res.CanaryOpens); diff != "" {
			t.Errorf("step %d %q: canary opens (-want +got):\n%s", i, s.cmd, diff)
		}
	}
	if err := c.Configure(t.Context(), Config{Canaries: []sandbox.Canary{{Path: "rel", Content: "x"}}}); !errors.Is(err, sandbox.ErrAgent) {
		t.Errorf("relative canary: %v", err)
	}
}

func TestShutdownEndsServer(t *testing.T) {
	srv, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	run(t, c, "", "sleep 1000 & echo $! > "+d+"/pid")
	pid := readPid(t, d+"/pid")
	if err := c.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-srv.Done()
	if srv.Err() != nil {
		t.Errorf("err %v", srv.Err())
	}
	waitFor(t, "background process to die", func() bool { return !alive(pid) })
	if _, err := c.Ping(t.Context()); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("ping after shutdown: %v", err)
	}
}

func TestBrokenConnectionFailsCalls(t *testing.T) {
	srv, err := NewServer(ServerConfig{Workdir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hostEnd, agentEnd := net.Pipe()
	go srv.ServeConn(context.Background(), agentEnd)
	c := NewClient(hostEnd, ClientOptions{})
	defer c.Close()

	errc := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := c.Exec(t.Context(), sandbox.ExecRequest{Command: "sleep 30", Timeout: 40 * time.Second})
			errc <- err
		}()
	}
	waitFor(t, "calls to start", func() bool { return srv.active.Load() == 1 }) // one session: one runs, two wait
	agentEnd.Close()
	for range 3 {
		if err := <-errc; !errors.Is(err, sandbox.ErrClosed) {
			t.Errorf("pending call: %v, want ErrClosed", err)
		}
	}
	if _, err := c.Ping(t.Context()); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("later call: %v, want ErrClosed", err)
	}
}

func TestClientErrors(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	resp, err := c.call(t.Context(), request{Op: "frobnicate"}, false)
	if !errors.Is(err, sandbox.ErrAgent) {
		t.Errorf("unknown op: %+v %v", resp, err)
	}
	info, err := c.Ping(t.Context())
	if err != nil || info.Version != Version || info.PID != os.Getpid() || info.Shell != "bash" {
		t.Errorf("ping %+v %v", info, err)
	}
}

// TestCopyInSymlinks: copy-in runs as root into directories the sandbox
// user may have touched; a symlink they left must not send files
// elsewhere.
func TestCopyInSymlinks(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	archive := func(names ...string) *bytes.Buffer {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, n := range names {
			tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
			tw.Write([]byte("x"))
		}
		tw.Close()
		return &b
	}
	d := t.TempDir()
	outside := filepath.Join(d, "outside")
	work := filepath.Join(d, "workspace")
	for _, p := range []string{outside, work} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, at string, uid int) {
		t.Helper()
		if err := os.Symlink(target, at); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(at, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	// the destination itself through a link the sandbox user planted
	link(outside, filepath.Join(work, "tests"), 1000)
	err := c.CopyIn(t.Context(), filepath.Join(work, "tests", "hidden"), archive("test_h.py"))
	if err == nil || !strings.Contains(err.Error(), "not owned by root") {
		t.Errorf("destination through a user's symlink: err %v; want a refusal naming the symlink", err)
	}
	// a link inside the destination pointing out of it
	dst := filepath.Join(work, "grader")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	link(outside, filepath.Join(dst, "sub"), 0)
	if err := c.CopyIn(t.Context(), dst, archive("sub/test_s.py")); err == nil {
		t.Error("entry under a symlink out of the destination: copied; want an error")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("files landed outside the destination: %v", ents)
	}
	// root's own links on the way are fine (as /bin, /lib are)
	link(dst, filepath.Join(d, "rootlink"), 0)
	if err := c.CopyIn(t.Context(), filepath.Join(d, "rootlink", "ok"), archive("test_ok.py")); err != nil {
		t.Errorf("through a root-owned symlink: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "ok", "test_ok.py")); err != nil {
		t.Errorf("through a root-owned symlink: %v", err)
	}
}

// TestCopyInSymlinkSwapRace: while copies run into a destination, the
// sandbox user keeps swapping one of its directories for a symlink out of
// the sandbox's tree and back (renameat2 RENAME_EXCHANGE, atomic). A copy
// may be refused, or land in the real directory, but no file ever lands
// where the link points.
func TestCopyInSymlinkSwapRace(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("copy-in runs as root and chowns")
	}
	_, c := newTestServer(t, ServerConfig{})
	d := t.TempDir()
	loot, work := filepath.Join(d, "loot"), filepath.Join(d, "workspace")
	for _, p := range []string{loot, work, filepath.Join(work, "tests")} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	swap := filepath.Join(work, "tests.swap")
	if err := os.Symlink(loot, swap); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(swap, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Name: "test_hidden.py", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("x"))
	tw.Close()

	stop := make(chan struct{})
	swapped := make(chan int)
	go func() {
		n := 0
		defer func() { swapped <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, swap, unix.AT_FDCWD, filepath.Join(work, "tests"), unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("swap: %v", err)
				return
			}
			n++
		}
	}()
	var copied, refused int
	for _, dest := range []string{"tests", "tests/hidden", "tests/a/b"} {
		for range 150 {
			if err := c.CopyIn(t.Context(), filepath.Join(work, dest), bytes.NewReader(b.Bytes())); err != nil {
				refused++
			} else {
				copied++
			}
		}
	}
	close(stop)
	n := <-swapped
	var landed []string
	filepath.WalkDir(loot, func(p string, _ os.DirEntry, _ error) error {
		if p != loot {
			landed = append(landed, p)
		}
		return nil
	})
	if len(landed) > 0 {
		t.Errorf("copy-in followed the swapped-in symlink: %v landed outside the destination", landed)
	}
	if n < 10 || refused == 0 {
		t.Errorf("%d swaps, %d copies refused: the race was not run", n, refused)
	}
	t.Logf("%d swaps; %d copies landed in the real directory, %d refused", n, copied, refused)
}
