package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox"
)

// effectFixture is a workspace with a visible test, a source file and a
// .git directory, and a site-packages directory with one installed
// package's metadata, under a watch.
func effectFixture(t *testing.T, max int) (ws, site string, c *Client) {
	t.Helper()
	ws, site = t.TempDir(), t.TempDir()
	for _, f := range []string{ws + "/tests/test_a.py", ws + "/src/m.py", ws + "/.git/HEAD",
		site + "/foo.dist-info/entry_points.txt", site + "/foo/__init__.py"} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, c = newTestServer(t, ServerConfig{Workdir: ws})
	w := &sandbox.Watch{Roots: []string{ws}, Skip: []string{".git"}, Shallow: []string{filepath.Dir(site) + "/" + filepath.Base(site)[:3] + "*"}, MaxEffects: max}
	if err := c.Configure(t.Context(), Config{Workdir: ws, Watch: w}); err != nil {
		t.Fatal(err)
	}
	return ws, site, c
}

func TestEffects(t *testing.T) {
	ws, site, c := effectFixture(t, 0)
	type E = sandbox.Effect
	steps := []struct {
		name    string
		session string
		cmd     string
		want    []E
		subset  bool   // the kernel and the watcher race on new directories: only these must be there
		gone    string // wait on the host until this file is gone before the call
	}{
		{name: "nothing yet", cmd: "true"},
		{name: "test weakened", cmd: "printf 'assert True\\n' > tests/test_a.py", want: []E{{Path: ws + "/tests/test_a.py", Op: "modify"}}},
		{name: "scratch file created and deleted", cmd: "echo hi > scratch.py; rm scratch.py",
			want: []E{{Path: ws + "/scratch.py", Op: "create"}, {Path: ws + "/scratch.py", Op: "modify"}, {Path: ws + "/scratch.py", Op: "delete"}}},
		{name: "chmod, not touch", cmd: "touch src/m.py; chmod 600 tests/test_a.py", want: []E{{Path: ws + "/tests/test_a.py", Op: "chmod"}}},
		{name: "rename", cmd: "mv src/m.py src/n.py", want: []E{{Path: ws + "/src/m.py", Op: "rename"}, {Path: ws + "/src/n.py", Op: "create"}}},
		{name: "replaced by a rename", cmd: "printf 'y\\n' > t.tmp && mv t.tmp tests/test_a.py",
			want: []E{{Path: ws + "/t.tmp", Op: "create"}, {Path: ws + "/t.tmp", Op: "modify"}, {Path: ws + "/t.tmp", Op: "rename"}, {Path: ws + "/tests/test_a.py", Op: "modify"}}},
		{name: "new directories are watched", cmd: "mkdir -p new/deep && echo 1 > new/deep/f && sleep 0.1 && echo 2 > new/deep/g", subset: true,
			want: []E{{Path: ws + "/new", Op: "create", IsDir: true}, {Path: ws + "/new/deep", Op: "create", IsDir: true},
				{Path: ws + "/new/deep/f", Op: "create"}, {Path: ws + "/new/deep/g", Op: "create"}, {Path: ws + "/new/deep/g", Op: "modify"}}},
		{name: "skipped directory", cmd: "echo ref > .git/ORIG_HEAD"},
		{name: "deleted tree", cmd: "rm -r new", want: []E{{Path: ws + "/new/deep/f", Op: "delete"}, {Path: ws + "/new/deep/g", Op: "delete"},
			{Path: ws + "/new/deep", Op: "delete", IsDir: true}, {Path: ws + "/new", Op: "delete", IsDir: true}}},
		{name: "evaluator surface", cmd: "echo 'import x' > " + site + "/zz.pth; echo '[pytest11]' >> " + site + "/foo.dist-info/entry_points.txt; echo > " + site + "/foo/other.py",
			want: []E{{Path: site + "/zz.pth", Op: "create"}, {Path: site + "/zz.pth", Op: "modify"}, {Path: site + "/foo.dist-info/entry_points.txt", Op: "modify"}}},
		{name: "rollcage's own session gets none", session: "rollcage-tools", cmd: "echo > tool.txt"},
		{name: "and they go to the next call", cmd: "true", want: []E{{Path: ws + "/tool.txt", Op: "create"}, {Path: ws + "/tool.txt", Op: "modify"}}},
		{name: "backgrounded", cmd: "(sleep 0.3; echo late > late.txt) >/dev/null 2>&1 &"},
		{name: "attributed to the call in flight", cmd: "until grep -qs late late.txt; do sleep 0.05; done", want: []E{{Path: ws + "/late.txt", Op: "create"}, {Path: ws + "/late.txt", Op: "modify"}}},
		{name: "backgrounded again", cmd: "(sleep 0.2; rm late.txt) >/dev/null 2>&1 &"},
		{name: "between calls: the next call", gone: ws + "/late.txt", cmd: "true", want: []E{{Path: ws + "/late.txt", Op: "delete"}}},
	}
	for _, s := range steps {
		if s.gone != "" {
			waitGone(t, s.gone)
		}
		res := run(t, c, s.session, s.cmd)
		got := res.Effects
		if s.subset {
			have := map[E]bool{}
			for _, e := range got {
				have[e] = true
			}
			for _, e := range s.want {
				if !have[e] {
					t.Errorf("%s: %q: missing %+v in %+v", s.name, s.cmd, e, got)
				}
			}
		} else if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s: %q: effects (-want +got):\n%s", s.name, s.cmd, diff)
		}
		if res.EffectsTruncated {
			t.Errorf("%s: truncated", s.name)
		}
	}
	// The host's own writes (write_file, copy_in) are not the next call's.
	if err := c.WriteFile(t.Context(), ws+"/hostdir/h.txt", []byte("h"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if res := run(t, c, "", "true"); len(res.Effects) != 0 {
		t.Errorf("host write reported: %+v", res.Effects)
	}
	// but what a policy call does in the directory the host made is watched
	if res := run(t, c, "", "echo > hostdir/p.txt"); len(res.Effects) == 0 || res.Effects[0].Path != ws+"/hostdir/p.txt" {
		t.Errorf("write in host-made directory: %+v", res.Effects)
	}
}

// waitGone polls until path no longer exists, so an effect is known to have
// happened between calls however slow the machine (the watcher's drain marker
// then orders it before the next call's end).
func waitGone(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Lstat(path); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still there after 30 s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEffectsTruncated(t *testing.T) {
	ws, _, c := effectFixture(t, 3)
	res := run(t, c, "", "for i in 1 2 3 4 5 6; do : > f$i; done")
	if len(res.Effects) != 3 || !res.EffectsTruncated {
		t.Errorf("6 creations with MaxEffects 3: %d effects, truncated %v", len(res.Effects), res.EffectsTruncated)
	}
	if res := run(t, c, "", "rm f1"); res.EffectsTruncated || len(res.Effects) != 1 || res.Effects[0] != (sandbox.Effect{Path: ws + "/f1", Op: "delete"}) {
		t.Errorf("next call: %+v truncated %v", res.Effects, res.EffectsTruncated)
	}
}

func TestWatchBadPath(t *testing.T) {
	_, c := newTestServer(t, ServerConfig{})
	err := c.Configure(t.Context(), Config{Watch: &sandbox.Watch{Roots: []string{"workspace"}}})
	if err == nil || !strings.Contains(err.Error(), "not absolute") {
		t.Errorf("relative root: %v", err)
	}
}
