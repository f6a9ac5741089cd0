package normalize

import (
	"path"
	"strings"

	"github.com/rollcage/rollcage/toolcall"
)

// Git subcommands whose operands name revisions.
var gitRevSubs = map[string]bool{
	"log": true, "show": true, "diff": true, "checkout": true, "switch": true, "reset": true,
	"rev-parse": true, "rev-list": true, "cherry-pick": true, "revert": true, "merge": true,
	"rebase": true, "branch": true, "tag": true, "cat-file": true, "ls-tree": true, "blame": true,
	"describe": true, "merge-base": true, "format-patch": true, "archive": true, "shortlog": true,
	"whatchanged": true, "name-rev": true, "diff-tree": true, "cherry": true, "range-diff": true,
	"show-branch": true, "grep": true, "bisect": true, "stash": true, "annotate": true,
	"fetch": true, "pull": true, "push": true, "restore": true, "notes": true, "worktree": true,
}

// Git subcommands that enumerate every ref (or every object) rather than
// the ones the task starts from.
var gitAllSubs = map[string]bool{
	"reflog": true, "for-each-ref": true, "show-ref": true, "fsck": true, "ls-remote": true,
}

// gitOpts are the flags whose value is not a revision (as the next
// argument or attached: -n5, -Sfoo).
var gitOpts = opts(gitVals)

// Flags whose separate next argument is a value, not a revision.
const gitVals = "-n -m -S -G -F -U -L -O -X -e -x --grep --author --committer --since --until --after --before " +
	"--format --pretty --date --depth --message --max-count --skip --min-parents --max-parents --abbrev " +
	"--encoding --decorate-refs --exclude --file --template --upload-pack --reference --separate-git-dir " +
	"--origin -o --jobs -j --filter --config --shallow-since --shallow-exclude --strategy --strategy-option " +
	"--source --pathspec-from-file --recurse-submodules --word-diff-regex"

// git records one git invocation: a GitOp, URLs of remotes, files removed
// with git rm, patches applied.
func (w *walker) git(args []string) {
	dir := ""
	i := 0
	for i < len(args) {
		a := args[i]
		if len(a) == 0 || a[0] != '-' {
			break
		}
		switch {
		case a == "-C":
			if i+1 < len(args) {
				dir = w.join(dir, args[i+1])
			}
			i++
		case a == "-c" || a == "--git-dir" || a == "--work-tree" || a == "--namespace" || a == "--exec-path" || a == "--config-env":
			i++
		case strings.HasPrefix(a, "--git-dir="):
			// A foreign .git is as good as a foreign history.
			w.a.add(&w.a.n.Reads, resolvePath(a[len("--git-dir="):], w.gitCwd(dir)))
		}
		i++
	}
	if i >= len(args) {
		return
	}
	op := toolcall.GitOp{Sub: args[i], Args: args[i+1:]}
	rest := op.Args
	cwd := w.gitCwd(dir)

	if gitAllSubs[op.Sub] {
		op.AllRefs = true
	}
	dashdash := len(rest)
	for k, a := range rest {
		if a == "--" {
			dashdash = k
			break
		}
	}
	for _, a := range rest[:dashdash] {
		if len(a) > 1 && a[0] == '-' {
			op.Flags = append(op.Flags, a)
			switch {
			case a == "--all" || a == "--branches" || a == "--tags" || a == "--remotes" || a == "--reflog" ||
				a == "-g" || a == "--walk-reflogs" || a == "--unreachable" || a == "--lost-found" ||
				a == "--batch-all-objects" || a == "--dangling" ||
				strings.HasPrefix(a, "--branches=") || strings.HasPrefix(a, "--tags=") ||
				strings.HasPrefix(a, "--remotes=") || strings.HasPrefix(a, "--glob="):
				op.AllRefs = true
			case op.Sub == "branch" && (a == "-a" || a == "-r"):
				op.AllRefs = true
			}
		}
	}
	for _, a := range rest {
		if isURL(a) {
			w.a.url(a)
		} else if h, ok := scpHost(a); ok {
			w.a.add(&w.a.n.URLs, a)
			w.a.host(h)
		}
	}

	p := gitOpts.parse(rest[:dashdash])
	ops := p.ops
	after := []string(nil)
	if dashdash < len(rest) {
		after = rest[dashdash+1:]
	}
	switch op.Sub {
	case "tag", "branch":
		if len(ops) == 0 || p.has("-l", "--list") {
			op.AllRefs = true
		}
	case "grep":
		if !p.has("-e") && len(ops) > 0 {
			ops = ops[1:] // the pattern
		}
	case "fetch", "pull", "push":
		// [remote] [refspec...]; a refspec src:dst names two refs.
		if len(ops) > 0 {
			ops = ops[1:]
		}
		var split []string
		for _, o := range ops {
			s, d, _ := strings.Cut(strings.TrimPrefix(o, "+"), ":")
			split = append(split, s, d)
		}
		ops = split
	case "stash":
		if len(ops) > 0 {
			ops = ops[1:] // show, apply, pop, list, ...
		}
	case "worktree", "notes", "bisect":
		if len(ops) > 0 {
			ops = ops[1:]
		}
	case "rm":
		for _, f := range append(ops, after...) {
			w.a.add(&w.a.n.Deletes, resolvePath(f, cwd))
		}
	case "apply", "am":
		for _, f := range append(ops, after...) {
			w.a.add(&w.a.n.Reads, resolvePath(f, cwd))
		}
	case "checkout", "restore":
		for _, f := range after {
			w.a.add(&w.a.n.Writes, resolvePath(f, cwd))
		}
	case "clone":
		if len(ops) > 1 {
			w.a.add(&w.a.n.Writes, resolvePath(ops[1], cwd))
		}
	}
	if gitRevSubs[op.Sub] {
		for _, o := range ops {
			addRefs(&op, o)
		}
	}
	w.a.n.Git = append(w.a.n.Git, op)
}

// gitCwd is the directory git runs in: -C dirs are relative to the cwd.
func (w *walker) gitCwd(dir string) string {
	if dir == "" {
		return w.cwd
	}
	return resolvePath(dir, w.cwd)
}

func (w *walker) join(dir, d string) string {
	if dir == "" || strings.HasPrefix(d, "/") {
		return d
	}
	return path.Join(dir, d)
}

// addRefs adds the revisions named by one operand: a..b and a...b name
// both ends, rev:path names rev.
func addRefs(op *toolcall.GitOp, o string) {
	if i := strings.IndexByte(o, ':'); i >= 0 {
		if i == 0 {
			return // :path is the index
		}
		o = o[:i]
	}
	for _, sep := range []string{"...", ".."} {
		if a, b, ok := strings.Cut(o, sep); ok {
			addRef(op, a)
			addRef(op, b)
			return
		}
	}
	addRef(op, o)
}

func addRef(op *toolcall.GitOp, r string) {
	r = strings.TrimPrefix(r, "^")
	if !looksLikeRev(r) {
		return
	}
	for _, x := range op.Refs {
		if x == r {
			return
		}
	}
	op.Refs = append(op.Refs, r)
}

// looksLikeRev tells a revision (main, origin/main, v1.2.0, 3f2a9c1,
// HEAD~2, @{u}) from a path (src/app.py, ./x, *.go).
func looksLikeRev(r string) bool {
	if r == "" || r == "-" || strings.ContainsAny(r, "*?[ ") {
		return false
	}
	if r[0] == '/' || strings.HasPrefix(r, "./") || strings.HasPrefix(r, "../") {
		return false
	}
	if strings.ContainsAny(r, "~^@") {
		return true
	}
	digits := true
	for _, c := range r {
		if c < '0' || c > '9' {
			digits = false
			break
		}
	}
	if digits {
		return len(r) >= 4
	}
	if !strings.Contains(r, ".") {
		return true
	}
	// Dotted: a version tag (v1.2.0, 2.0) is a ref, a file name is not.
	v := strings.TrimPrefix(r, "v")
	if v != "" && v[0] >= '0' && v[0] <= '9' {
		return true
	}
	return false
}
