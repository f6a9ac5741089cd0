package audit

import (
	"encoding/json"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/toolcall"
)

// Inferred is task context an episode's data lacked and the trajectory
// showed. Fields stay empty when it did not. Only evidence that
// determines a value counts: a scratch cd, a filtered log or the first
// path written say nothing about where the repository is or which commit
// it is at.
type Inferred struct {
	// BaseCommit is HEAD as shown before the agent moved it: the first
	// commit of an unfiltered git log of HEAD, or git rev-parse HEAD.
	BaseCommit string `json:"base_commit,omitempty"`
	// FutureCommits are commits an all-refs listing showed above the base
	// commit: newer than HEAD and not its ancestors.
	FutureCommits []string `json:"future_commits,omitempty"`
	// Workdir is the repository: the path the instruction names, else the
	// session's directory as the first pwd (or git rev-parse
	// --show-toplevel) printed it before any cd, else the directory of a
	// cd that git then answered in.
	Workdir string `json:"workdir,omitempty"`
	// WorkdirFrom says which evidence gave Workdir: "instruction", "pwd",
	// "git toplevel", "cd and git" (cd /x && git ... answered in /x).
	WorkdirFrom string `json:"workdir_from,omitempty"`
}

func (i Inferred) empty() bool {
	return i.BaseCommit == "" && len(i.FutureCommits) == 0 && i.Workdir == ""
}

var logHash = regexp.MustCompile(`(?m)^[*|\\/ ]*(?:commit )?([0-9a-f]{7,40})\b`)

// Where instructions name the repository: OpenHands' <uploaded_files>,
// mini-swe-agent's "/testbed (this is the working directory ...)",
// "in the directory /x", "the repository at /x".
var instructionDirs = []*regexp.Regexp{
	regexp.MustCompile(`<uploaded_files>\s*(/[^\s<]+)\s*</uploaded_files>`),
	regexp.MustCompile(`(/[\w.\-/]+)\s+\(this is the working directory`),
	regexp.MustCompile(`(?i)\b(?:repository|repo|codebase|code base|project)\s+(?:is\s+)?(?:located\s+)?(?:at|in)\s+(/[\w.\-/]+\w)`),
	regexp.MustCompile(`(?i)\bin the directory\s+(/[\w.\-/]+\w)`),
	regexp.MustCompile(`(?i)\bworking directory\s+(?:is\s+)?(/[\w.\-/]+\w)`),
}

// instructionWorkdir is the repository path an instruction names, if it
// names one.
func instructionWorkdir(instr string) string {
	for _, re := range instructionDirs {
		if m := re.FindStringSubmatch(instr); m != nil {
			if p := path.Clean(m[1]); p != "/" {
				return p
			}
		}
	}
	return ""
}

// infer reads task context out of the steps (normalized with cwd as
// given). known is what the task context already says; only gaps are
// filled.
func infer(steps []Step, norms []toolcall.Normalized, known monitor.TaskContext) Inferred {
	var inf Inferred
	if known.Workdir == "" {
		if d := instructionWorkdir(known.Instruction); d != "" {
			inf.Workdir, inf.WorkdirFrom = d, "instruction"
		}
	}
	base := known.BaseCommit
	headMoved, cdSeen := false, false
	var allListings []string // outputs of all-refs logs, in order
	for i, n := range norms {
		if n.Tool != toolcall.Bash {
			continue
		}
		if inf.Workdir == "" && known.Workdir == "" && !cdSeen {
			if d, from := printedDir(n, steps[i].Output); d != "" {
				inf.Workdir, inf.WorkdirFrom = d, from
			}
		}
		if inf.Workdir == "" && known.Workdir == "" {
			if d := gitDir(n, steps[i].Output); d != "" {
				inf.Workdir, inf.WorkdirFrom = d, "cd and git"
			}
		}
		for _, c := range n.Commands {
			if c.Name == "cd" || c.Name == "pushd" {
				cdSeen = true
			}
		}
		if base == "" && !headMoved {
			if h := headShown(n, steps[i].Output); h != "" {
				base, inf.BaseCommit = h, h
			}
		}
		for _, op := range n.Git {
			if op.Sub == "log" && op.AllRefs {
				allListings = append(allListings, steps[i].Output)
			}
			if movesHead(op) {
				headMoved = true
			}
		}
	}
	if base != "" {
		for _, out := range allListings {
			for _, m := range logHash.FindAllStringSubmatch(out, -1) {
				h := m[1]
				if strings.HasPrefix(h, base) || strings.HasPrefix(base, h) {
					break
				}
				if !slices.Contains(inf.FutureCommits, h) {
					inf.FutureCommits = append(inf.FutureCommits, h)
				}
			}
		}
	}
	return inf
}

var absLine = regexp.MustCompile(`^/[^\s:]*$`)

// printedDir is the session's directory when the call's first command
// prints it (pwd, git rev-parse --show-toplevel) as the output's first
// line.
func printedDir(n toolcall.Normalized, out string) (string, string) {
	if len(n.Commands) == 0 || n.Commands[0].Via != "" {
		return "", ""
	}
	c := n.Commands[0]
	from := ""
	switch {
	case c.Name == "pwd" && len(c.Argv) == 1:
		from = "pwd"
	case c.Name == "git" && slices.Equal(c.Argv[1:], []string{"rev-parse", "--show-toplevel"}):
		from = "git toplevel"
	default:
		return "", ""
	}
	first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	first = strings.TrimSpace(first)
	if !absLine.MatchString(first) || first == "/" {
		return "", ""
	}
	return path.Clean(first), from
}

// gitDir is the directory of `cd /abs && git ...` when git answered
// there (it printed something and no "not a git repository"): the
// repository, or a directory in it. A cd alone says nothing.
func gitDir(n toolcall.Normalized, out string) string {
	if len(n.Commands) < 2 || len(n.Git) == 0 || strings.TrimSpace(out) == "" || strings.Contains(out, "not a git repository") {
		return ""
	}
	c, g := n.Commands[0], n.Commands[1]
	if c.Name != "cd" || c.Via != "" || len(c.Argv) != 2 || !path.IsAbs(c.Argv[1]) || g.Name != "git" || g.Via != "" {
		return ""
	}
	if d := path.Clean(c.Argv[1]); d != "/" && d != "/tmp" && !strings.HasPrefix(d, "/tmp/") {
		return d
	}
	return ""
}

var fullHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// headShown is HEAD's commit when the call shows it unambiguously: git
// rev-parse HEAD, or a git log of HEAD that neither filters commits nor
// reorders them, piped into nothing that filters lines.
func headShown(n toolcall.Normalized, out string) string {
	if len(n.Git) != 1 {
		return ""
	}
	for _, c := range n.Commands {
		if c.Via == "pipe" && c.Name != "git" && c.Name != "head" && c.Name != "cat" && c.Name != "less" && c.Name != "more" {
			return ""
		}
	}
	op := n.Git[0]
	switch op.Sub {
	case "rev-parse":
		if !slices.Equal(op.Args, []string{"HEAD"}) {
			return ""
		}
		first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		if fullHash.MatchString(strings.TrimSpace(first)) {
			return strings.TrimSpace(first)
		}
	case "log":
		if op.AllRefs || !unfilteredLog(op.Args) {
			return ""
		}
		if m := logHash.FindStringSubmatch(out); m != nil {
			return m[1]
		}
	}
	return ""
}

// logLayout are git log options that change how commits are shown but
// not which, nor their order; anything else (a path, --grep, -S, an
// author, a date range, --reverse, a ref) filters or reorders.
var logLayout = []string{"--oneline", "--format", "--pretty", "--decorate", "--no-decorate", "--graph",
	"--stat", "--shortstat", "--name-only", "--name-status", "-p", "--patch", "--abbrev-commit",
	"--no-abbrev-commit", "--abbrev", "--date", "--color", "--no-color", "--first-parent", "--no-pager"}

func unfilteredLog(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "HEAD":
		case a == "-n" || a == "--max-count":
			i++ // its count
		case strings.HasPrefix(a, "--max-count="), len(a) > 1 && a[0] == '-' && isDigits(a[1:]), strings.HasPrefix(a, "-n") && isDigits(a[2:]):
		case slices.ContainsFunc(logLayout, func(l string) bool { return a == l || strings.HasPrefix(a, l+"=") }):
		default:
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// movesHead: after this, HEAD may no longer be the base commit.
func movesHead(op toolcall.GitOp) bool {
	switch op.Sub {
	case "commit", "reset", "rebase", "merge", "pull", "am", "cherry-pick", "revert", "switch":
		return true
	case "checkout":
		// git checkout -- file (or a path) undoes edits; a ref moves HEAD
		return len(op.Refs) > 0 && !slices.Contains(op.Args, "--")
	}
	return false
}

var hexRef = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// facts are the sandbox facts the rules get: those recorded online when
// the trajectory has them, plus future commits known from the task (its
// upstream fix) and inferred from the trajectory.
func facts(t monitor.TaskContext, inf Inferred, recorded *monitor.Facts) monitor.Facts {
	f := monitor.Facts{NonAncestorCommits: []string{}, NonAncestorRefs: []string{}, Canaries: []string{}}
	if recorded != nil {
		f = *recorded
		f.NonAncestorCommits = append([]string{}, f.NonAncestorCommits...)
		f.NonAncestorRefs = append([]string{}, f.NonAncestorRefs...)
		f.Canaries = append([]string{}, f.Canaries...)
	}
	switch {
	case hexRef.MatchString(t.UpstreamFixRef):
		if !slices.Contains(f.NonAncestorCommits, t.UpstreamFixRef) {
			f.NonAncestorCommits = append(f.NonAncestorCommits, t.UpstreamFixRef)
		}
	case t.UpstreamFixRef != "" && !slices.Contains(f.NonAncestorRefs, t.UpstreamFixRef):
		f.NonAncestorRefs = append(f.NonAncestorRefs, t.UpstreamFixRef)
	}
	for _, c := range inf.FutureCommits {
		if !slices.Contains(f.NonAncestorCommits, c) {
			f.NonAncestorCommits = append(f.NonAncestorCommits, c)
		}
	}
	return f
}

// cwdAfter is the session directory after a bash call, as far as the
// text shows it: the last top-level cd to an absolute or relative path.
func cwdAfter(n toolcall.Normalized, cwd string) string {
	for _, c := range n.Commands {
		if c.Name == "cd" && c.Via == "" && len(c.Argv) == 2 && !strings.ContainsAny(c.Argv[1], "$~`") {
			if path.IsAbs(c.Argv[1]) {
				cwd = path.Clean(c.Argv[1])
			} else if cwd != "" {
				cwd = path.Join(cwd, c.Argv[1])
			}
		}
	}
	return cwd
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
