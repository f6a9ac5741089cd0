package normalize

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/toolcall"
)

func writeCall(p, content string) toolcall.Call {
	args, _ := json.Marshal(toolcall.WriteFileArgs{Path: p, Content: content})
	return toolcall.Call{Tool: toolcall.WriteFile, Args: args}
}

// TestNormalizeFollowsScriptFiles: a call that runs a file the policy wrote
// earlier is normalized with the file's text, however it is run; files
// never written, deleted since, or run as data are not followed.
func TestNormalizeFollowsScriptFiles(t *testing.T) {
	tests := []struct {
		name    string
		before  []toolcall.Call
		call    string
		wantGit string // a git subcommand the call must show, "" for none
		wantCmd string // a command the call must show as run from the file, "" for none
	}{
		{"sh FILE", []toolcall.Call{writeCall("/tmp/look.sh", "git show origin/HEAD:x.py > /tmp/w.py\n")}, "sh /tmp/look.sh && diff /tmp/w.py x.py", "show", ""},
		{"bash relative", []toolcall.Call{writeCall("run.sh", "git log --all -p -- x.py\n")}, "bash run.sh | sed -n 1,80p; rm run.sh", "log", ""},
		{"source", []toolcall.Call{writeCall("/tmp/env.sh", "cat /opt/grader/tests/t.py\n")}, ". /tmp/env.sh", "", "cat"},
		{"python FILE", []toolcall.Call{writeCall("/workspace/tools/check.py", "import subprocess\nsubprocess.run(['git', 'log', '--all'])\n")}, "python3 tools/check.py | head", "log", ""},
		{"run by path, shebang", []toolcall.Call{writeCall("/tmp/x", "#!/usr/bin/env python3\nimport os\nos.system('git show v1.2.1')\n")}, "chmod +x /tmp/x && /tmp/x", "show", ""},
		{"heredoc, then run", []toolcall.Call{bash("cat > /tmp/t.sh <<'EOF'\nfor f in /opt/grader/tests/*; do cat \"$f\"; done\nEOF")}, "bash /tmp/t.sh", "", "cat"},
		{"deleted since", []toolcall.Call{writeCall("/tmp/look.sh", "git show origin/main\n"), bash("rm /tmp/look.sh")}, "sh /tmp/look.sh", "", ""},
		{"never written", nil, "sh /tmp/other.sh", "", ""},
		{"read, not run", []toolcall.Call{writeCall("/tmp/look.sh", "git show origin/main\n")}, "cat /tmp/look.sh", "", ""},
		{"runs itself", []toolcall.Call{writeCall("/tmp/loop.sh", "sh /tmp/loop.sh\ngit status\n")}, "sh /tmp/loop.sh", "status", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var files Files
			for _, c := range tc.before {
				files.Record(c, Normalize(c, "/workspace", &files))
			}
			n := Normalize(bash(tc.call), "/workspace", &files)
			if n.Unparsed {
				t.Fatalf("unparsed: %s", n.ParseError)
			}
			subs := []string{}
			for _, g := range n.Git {
				subs = append(subs, g.Sub)
			}
			if tc.wantGit != "" && !slices.Contains(subs, tc.wantGit) {
				t.Errorf("git ops %v, want %q among them", subs, tc.wantGit)
			}
			if tc.wantGit == "" && tc.wantCmd == "" && len(n.Git) > 0 {
				t.Errorf("git ops %v from a file that must not be followed", subs)
			}
			if tc.wantCmd != "" && !slices.ContainsFunc(n.Commands, func(c toolcall.Command) bool {
				return c.Name == tc.wantCmd && c.Via == "file"
			}) {
				t.Errorf("commands %+v, want %s from the file", n.Commands, tc.wantCmd)
			}
		})
	}
}

func TestFilesBounds(t *testing.T) {
	var f Files
	f.Set("/big", strings.Repeat("x", maxScriptFileSize+1))
	if _, ok := f.Get("/big"); ok {
		t.Error("a file over the size bound was kept")
	}
	for i := range maxScriptFiles + 5 {
		f.Set("/f"+strings.Repeat("a", i), "x")
	}
	if len(f.m) != maxScriptFiles {
		t.Errorf("kept %d files, want the bound %d", len(f.m), maxScriptFiles)
	}
	var nilFiles *Files
	nilFiles.Set("/x", "y") // ignored, no panic
	if _, ok := nilFiles.Get("/x"); ok {
		t.Error("nil Files knows a file")
	}
}

// TestRunFileAgain: a Python file run again is normalized as on its first
// run (its matches remembered), against the cwd of the run, and with its
// new text once it is written again or deleted.
func TestRunFileAgain(t *testing.T) {
	const first = "import os, subprocess\nopen('data/in.txt').read()\nsubprocess.run(['git', 'log', '--all'])\n"
	const second = "import shutil\nshutil.rmtree('build')\n"
	var files Files
	run := func(cwd string) toolcall.Normalized {
		return Normalize(bash("python3 /tmp/r.py"), cwd, &files)
	}
	files.Record(writeCall("/tmp/r.py", first), Normalize(writeCall("/tmp/r.py", first), "/repo", &files))
	a, b, c := run("/repo"), run("/repo"), run("/srv/other")
	if !slices.Contains(a.Reads, "/repo/data/in.txt") || len(a.Git) == 0 || a.Git[0].Sub != "log" {
		t.Fatalf("first run: reads %q, git %+v; want /repo/data/in.txt read and git log run", a.Reads, a.Git)
	}
	if !slices.Equal(a.Reads, b.Reads) || len(b.Git) != len(a.Git) || len(b.Commands) != len(a.Commands) {
		t.Errorf("second run differs: reads %q git %d commands %d, first %q %d %d", b.Reads, len(b.Git), len(b.Commands), a.Reads, len(a.Git), len(a.Commands))
	}
	if !slices.Contains(c.Reads, "/srv/other/data/in.txt") || slices.Contains(c.Reads, "/repo/data/in.txt") {
		t.Errorf("run from /srv/other reads %q, want its own cwd's data/in.txt", c.Reads)
	}
	files.Record(writeCall("/tmp/r.py", second), Normalize(writeCall("/tmp/r.py", second), "/repo", &files))
	d := run("/repo")
	if !slices.Contains(d.Deletes, "/repo/build") || slices.Contains(d.Reads, "/repo/data/in.txt") {
		t.Errorf("after the rewrite: deletes %q reads %q, want the new text's /repo/build deleted and the old read gone", d.Deletes, d.Reads)
	}
	files.Delete("/tmp/r.py")
	if e := run("/repo"); slices.Contains(e.Deletes, "/repo/build") {
		t.Errorf("after the delete the file was still followed: deletes %q", e.Deletes)
	}
}
