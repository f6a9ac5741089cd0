package task

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// ErrSubmission marks a submission that cannot be taken or applied because
// of what the policy did to its repository: objects deleted, the base
// commit gone, files it made unreadable, a change too large. It is the
// policy's outcome (reward 0, failure class agent), never infrastructure
// or grading: nothing the policy does may get its episode masked.
var ErrSubmission = errors.New("no submission")

// Submission limits.
const (
	// MaxSubmission bounds the submitted diff. A larger change is the
	// policy's failure.
	MaxSubmission = 16 << 20
	// maxTree bounds the submitted tree's file list kept for inspection.
	maxTree = 8 << 20
	// submitTimeout bounds taking the diff; a repository that takes longer
	// (the policy filled it) is the policy's failure.
	submitTimeout  = 2 * time.Minute
	submitSession  = "rollcage-submit"
	submitDir      = "/tmp/rollcage-submit"
	submitDiffFile = submitDir + "/diff"
)

// Grade modes of a Task (field "grade").
const (
	// GradeDiff grades the repository's change against the base commit,
	// applied in a fresh sandbox from the task image. The default.
	GradeDiff = "diff"
	// GradeSnapshot grades a snapshot of the episode's filesystem in a
	// fresh sandbox: for solutions that install things outside the repo.
	GradeSnapshot = "snapshot"
)

// Mode is t's grade mode with the default applied.
func (t Task) Mode() string {
	if t.Grade == "" {
		return GradeDiff
	}
	return t.Grade
}

// FileChange is one file of a submission: its path relative to the
// workdir and git's status letter (A added, M modified, D deleted, T type
// changed).
type FileChange struct {
	Path   string `json:"path"`
	Status string `json:"status"`
}

// Submission is what the policy submitted: the repository's change against
// the base commit, binary-safe, untracked files that are not ignored
// included (as SWE-bench takes it).
type Submission struct {
	Base   string
	Diff   []byte
	SHA256 string // of Diff, hex
	Files  []FileChange
	// Tree is every file of the submitted tree (workdir-relative), for the
	// load-path inspection; cut at maxTree bytes (TreeCut).
	Tree    []string
	TreeCut bool
	// Ignored are the git-ignored files of the workdir, taken in snapshot
	// mode only (a snapshot grades them; a diff leaves them out).
	Ignored []string
	// ConfigDiff is the change of the test-runner configuration files with
	// whole-file context, so that inspection sees which section a changed
	// line is in.
	ConfigDiff []byte
	// Survivors counts processes of the sandbox user still alive after the
	// kill (none is expected; a grade never runs beside them anyway).
	Survivors int
	// Kill and Take are how long stopping the policy's processes and
	// taking the diff took.
	Kill, Take time.Duration
}

// StopUser kills every process of the sandbox user in sb, so that nothing
// of the policy runs while the submission is taken. It returns how many
// were still there after the last round (zombies not yet reaped count).
//
// The result of the command that stopped them is returned too: it
// carries the effects and canary opens seen since the policy's last call
// (what a process left running did between calls and until now).
//
// A sandbox that can (sandbox.ProcessKiller) stops them without forking,
// by its pid namespace, so a full pid table cannot keep a correct fix
// from being taken; the command that collects the effects runs after.
func StopUser(ctx context.Context, sb sandbox.Sandbox) (survivors int, res sandbox.ExecResult, err error) {
	if pk, ok := sb.(sandbox.ProcessKiller); ok {
		kr, err := pk.KillAll(ctx)
		if err != nil {
			return 0, res, fmt.Errorf("stop the sandbox's processes: %w", err)
		}
		res, err = sb.Exec(ctx, sandbox.ExecRequest{Session: submitSession, Command: "true", Timeout: 30 * time.Second, Pending: true})
		if err != nil {
			return len(kr.Survivors), res, fmt.Errorf("collect the effects of the policy's processes: %w", err)
		}
		return len(kr.Survivors), res, nil
	}
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Session: submitSession, Command: killScript, Timeout: 30 * time.Second, Pending: true})
	if err != nil {
		return 0, res, fmt.Errorf("stop the sandbox user's processes: %w", err)
	}
	out := strings.TrimSpace(res.Output)
	if n, ok := strings.CutPrefix(lastLine(out), "rollcage-kill-left "); ok {
		survivors, _ = strconv.Atoi(n)
	}
	return survivors, res, nil
}

// killScript runs as the sandbox user in its own session: kill(-1) reaches
// every process of that user but the caller; repeat it until no process of
// the user is left but zombies (forks in flight die in a later round;
// zombies run nothing and wait for their parent to reap them).
const killScript = `me=$$; me2=$BASHPID; uid=$(id -u); n=0
alive() { n=0; for s in /proc/[0-9]*; do p=${s#/proc/}; [ "$p" = "$me" ] || [ "$p" = "$me2" ] && continue; st=; u=
{ while read -r k v r; do case $k in State:) st=$v;; Uid:) u=$v; break;; esac; done < "$s/status"; } 2>/dev/null
[ "$u" = "$uid" ] && [ "$st" != Z ] && n=$((n+1)); done; return 0; }
for i in $(seq 1 100); do kill -KILL -1 2>/dev/null; alive; [ "$n" = 0 ] && break; sleep 0.02; done
echo "rollcage-kill-left $n"`

// TakeSubmission takes the repository's change against base in sb (the
// episode's sandbox, after StopUser). It runs as the sandbox user with git
// hardened against the repository's own configuration: a fresh git
// directory of its own whose object store borrows the repository's, so
// none of the policy's config, hooks, fsmonitor, filter or diff drivers,
// replace refs or grafts is read, and no code of the policy's runs.
//
// A repository the policy broke (base commit or objects missing, files
// unreadable) or a change over MaxSubmission gives an error wrapping
// ErrSubmission; a sandbox failure an error wrapping the sandbox's.
func TakeSubmission(ctx context.Context, sb sandbox.Sandbox, t Task, base string) (Submission, error) {
	t = t.withDefaults()
	sub := Submission{Base: base}
	if !hexRE.MatchString(base) {
		return sub, fmt.Errorf("take submission: base commit %q is not a commit id: %w", base, ErrGrading)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Session:   submitSession,
		Command:   cleanEnv("/tmp") + " " + shellQuote(submitScript(t.Workdir, base, configPathspecs)),
		Timeout:   submitTimeout,
		MaxOutput: 64 << 10,
	})
	if err != nil {
		return sub, fmt.Errorf("take submission: %w", err)
	}
	out := strings.TrimSpace(res.Output)
	switch {
	case res.Stopped != "":
		return sub, fmt.Errorf("take submission: git stopped (%s) after %s: %w", res.Stopped, res.Duration.Round(time.Millisecond), ErrSubmission)
	case res.ExitCode == 5:
		return sub, fmt.Errorf("take submission: %s: %w", lastLine(out), ErrGrading)
	case res.ExitCode == 4:
		return sub, fmt.Errorf("take submission: the change is larger than %d bytes: %w", MaxSubmission, ErrSubmission)
	case res.ExitCode != 0:
		return sub, fmt.Errorf("take submission: the repository cannot give a diff against %s (exit %d): %s: %w",
			base, res.ExitCode, lastLine(out), ErrSubmission)
	}
	read := func(name string, max int64) ([]byte, error) {
		b, cut, err := sb.ReadFile(ctx, submitDir+"/"+name, max+1)
		if err != nil {
			return nil, fmt.Errorf("take submission: read %s: %w", name, err)
		}
		if cut || int64(len(b)) > max {
			return b[:min(int64(len(b)), max)], errCut
		}
		return b, nil
	}
	if sub.Diff, err = read("diff", MaxSubmission); err != nil {
		if errors.Is(err, errCut) {
			return sub, fmt.Errorf("take submission: the change is larger than %d bytes: %w", MaxSubmission, ErrSubmission)
		}
		return sub, err
	}
	sum := sha256.Sum256(sub.Diff)
	sub.SHA256 = hex.EncodeToString(sum[:])
	files, err := read("files", MaxSubmission)
	if err != nil && !errors.Is(err, errCut) {
		return sub, err
	}
	sub.Files = parseNameStatus(files)
	tree, err := read("tree", maxTree)
	if err != nil && !errors.Is(err, errCut) {
		return sub, err
	}
	sub.TreeCut = errors.Is(err, errCut)
	sub.Tree = splitNUL(tree)
	if t.Mode() == GradeSnapshot {
		// A snapshot carries the ignored files too: inspect them as
		// added files of the change.
		ign, err := read("ignored", maxTree)
		if err != nil && !errors.Is(err, errCut) {
			return sub, err
		}
		sub.TreeCut = sub.TreeCut || errors.Is(err, errCut)
		for _, p := range splitNUL(ign) {
			sub.Tree = append(sub.Tree, p)
			sub.Files = append(sub.Files, FileChange{Path: p, Status: "A"})
			sub.Ignored = append(sub.Ignored, p)
		}
	}
	if sub.ConfigDiff, err = read("config", MaxSubmission); err != nil && !errors.Is(err, errCut) {
		return sub, err
	}
	return sub, nil
}

var errCut = errors.New("cut")

// configPathspecs are the files whose change inspection reads with whole
// context (a change is only evaluator manipulation inside some sections).
var configPathspecs = []string{"setup.cfg", "tox.ini", "pyproject.toml", "package.json", "Makefile", "makefile", "GNUmakefile"}

// gitHarden are the options every git of grading runs with: no fsmonitor
// or hooks, no external diff or textconv, no pager, no lock taken.
const gitHarden = "git -c core.fsmonitor=false -c core.hooksPath=/dev/null -c core.untrackedCache=false " +
	"-c core.autocrlf=false -c core.safecrlf=false -c diff.external= -c core.pager=cat -c core.splitIndex=false"

// cleanEnv is the prefix that runs a bash script in a clean environment:
// nothing of the policy's environment, HOME pointing to home, git's
// system and global configuration off.
func cleanEnv(home string) string {
	return "/usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=" + shellQuote(home) +
		" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_NO_REPLACE_OBJECTS=1 GIT_ATTR_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0" +
		" GIT_OPTIONAL_LOCKS=0 GIT_NO_LAZY_FETCH=1 /bin/bash --noprofile --norc -c"
}

// submitScript writes diff, files (name-status, NUL-separated), tree (the
// submitted tree's files) and config (whole-context diff of configPathspecs)
// under submitDir. Exit 4: too large; 5: no git in the image; other
// non-zero: the repository could not give a diff.
func submitScript(workdir, base string, config []string) string {
	var specs []string
	for _, c := range config {
		specs = append(specs, shellQuote(":(glob)**/"+c))
	}
	return `set -u
command -v git >/dev/null || { echo "no git in the task image: grade mode diff needs git (or use grade: snapshot)"; exit 5; }
W=` + shellQuote(workdir) + `; B=` + shellQuote(base) + `; D=` + submitDir + `
rm -rf "$D" && mkdir -m 0700 "$D" || exit 3
[ -d "$W/.git/objects" ] || { echo "$W/.git/objects is missing"; exit 3; }
export GIT_DIR="$D/git" GIT_WORK_TREE="$W" GIT_INDEX_FILE="$D/index" HOME="$D"
mkdir -p "$GIT_DIR/objects/info" "$GIT_DIR/refs" "$GIT_DIR/info" && echo 'ref: refs/heads/submit' > "$GIT_DIR/HEAD" &&
printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n' > "$GIT_DIR/config" &&
echo "$W/.git/objects" > "$GIT_DIR/objects/info/alternates" || exit 3
cd "$W" || exit 3
G="` + gitHarden + `"
$G cat-file -e "$B^{commit}" 2>&1 || { echo "base commit $B is missing from the repository"; exit 3; }
$G read-tree "$B" 2>&1 || exit 3
$G add -A 2>&1 >/dev/null || exit 3
$G diff --cached --binary --full-index --no-renames --no-ext-diff --no-textconv --no-color "$B" 2>"$D/err" | head -c ` + strconv.Itoa(MaxSubmission+1) + ` > "$D/diff"; st=${PIPESTATUS[0]}
[ "$(stat -c %s "$D/diff")" -gt ` + strconv.Itoa(MaxSubmission) + ` ] && exit 4
[ "$st" = 0 ] || { head -c 300 "$D/err"; exit 3; }
$G diff --cached --name-status --no-renames -z "$B" > "$D/files" || exit 3
$G ls-files -z > "$D/tree" || exit 3
$G ls-files -z -o -i --exclude-standard > "$D/ignored" || exit 3
$G diff --cached --no-renames --no-ext-diff --no-textconv --no-color -U1000000 "$B" -- ` + strings.Join(specs, " ") + ` > "$D/config" || exit 3
echo ok`
}

func splitNUL(b []byte) []string {
	var out []string
	for _, f := range bytes.Split(b, []byte{0}) {
		if len(f) > 0 {
			out = append(out, string(f))
		}
	}
	return out
}

// parseNameStatus reads `git diff --name-status -z`: status, NUL, path, NUL.
func parseNameStatus(b []byte) []FileChange {
	f := splitNUL(b)
	var out []FileChange
	for i := 0; i+1 < len(f); i += 2 {
		out = append(out, FileChange{Status: f[i][:1], Path: f[i+1]})
	}
	return out
}

// ApplySubmission applies sub's diff to the repository in sb (a fresh
// sandbox from the task image) as the sandbox user, with git hardened. A
// diff that does not apply is the policy's (ErrSubmission): the policy's
// repository no longer matched its base.
func ApplySubmission(ctx context.Context, sb sandbox.Sandbox, t Task, sub Submission) error {
	t = t.withDefaults()
	if len(sub.Diff) == 0 {
		return nil
	}
	const patch = "/tmp/rollcage-submission.diff"
	if err := sb.WriteFile(ctx, patch, sub.Diff, 0o600); err != nil {
		return fmt.Errorf("apply submission: %w", err)
	}
	// Compiled files beside their own source are left out: the
	// interpreter compiles the source afresh, and an unchecked .pyc
	// would run code that no check reads.
	var exclude string
	for _, p := range BesideSource(sub) {
		exclude += " --exclude=" + shellQuote(globEscape(p))
	}
	script := "cd " + shellQuote(t.Workdir) + " && " + gitHarden + " apply --binary --whitespace=nowarn" + exclude + " " + patch + " 2>&1"
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Session: submitSession, Command: cleanEnv("/nonexistent") + " " + shellQuote(script), Timeout: submitTimeout})
	if err != nil {
		return fmt.Errorf("apply submission: %w", err)
	}
	if res.ExitCode != 0 || res.Stopped != "" {
		return fmt.Errorf("apply submission: git apply failed (exit %d%s): %s: %w", res.ExitCode, res.Stopped, lastLine(res.Output), ErrSubmission)
	}
	return nil
}

// globEscape quotes fnmatch's special characters in p.
func globEscape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// PurgeBytecode removes every __pycache__ directory under the workdir of
// sb, a grading sandbox from a snapshot: the interpreter compiles the
// sources afresh, and no unchecked .pyc of the policy's runs in their
// place.
func PurgeBytecode(ctx context.Context, sb sandbox.Sandbox, t Task) error {
	t = t.withDefaults()
	script := "find " + shellQuote(t.Workdir) + " -xdev -name __pycache__ -type d -prune -exec rm -rf {} + 2>&1; exit 0"
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Session: submitSession, Command: cleanEnv("/nonexistent") + " " + shellQuote(script), Timeout: submitTimeout})
	if err != nil {
		return fmt.Errorf("purge bytecode: %w", err)
	}
	if res.Stopped != "" {
		return fmt.Errorf("purge bytecode: stopped (%s): %w", res.Stopped, ErrSubmission)
	}
	return nil
}
