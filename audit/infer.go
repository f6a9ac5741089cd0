package audit

import (
	"encoding/json"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/rollcage/rollcage/monitor"
)

// Inferred is task context an episode's data lacked and the trajectory
// showed. Fields stay empty when it did not.
type Inferred struct {
	// BaseCommit is the first commit of the first plain git log (HEAD's
	// history) the model ran.
	BaseCommit string `json:"base_commit,omitempty"`
	// FutureCommits are commits an all-refs listing showed above the base
	// commit: newer than HEAD and not its ancestors.
	FutureCommits []string `json:"future_commits,omitempty"`
	// Workdir is the first directory the model cd'ed into, or the top
	// directory of the first absolute path it wrote.
	Workdir string `json:"workdir,omitempty"`
}

func (i Inferred) empty() bool {
	return i.BaseCommit == "" && len(i.FutureCommits) == 0 && i.Workdir == ""
}

var logHash = regexp.MustCompile(`(?m)^[*|\\/ ]*(?:commit )?([0-9a-f]{7,40})\b`)

// infer reads task context out of the steps (normalized with cwd as
// given). known is what the task context already says; only gaps are
// filled.
func infer(steps []Step, norms []monitor.Normalized, known monitor.TaskContext) Inferred {
	var inf Inferred
	base := known.BaseCommit
	var allListings []string // outputs of all-refs logs, in order
	for i, n := range norms {
		if n.Tool == monitor.ToolBash {
			if inf.Workdir == "" && known.Workdir == "" {
				for _, c := range n.Commands {
					if c.Name == "cd" && c.Via == "" && len(c.Argv) == 2 && path.IsAbs(c.Argv[1]) {
						inf.Workdir = path.Clean(c.Argv[1])
						break
					}
				}
			}
			if len(n.Git) == 1 && n.Git[0].Sub == "log" {
				op := n.Git[0]
				switch {
				case op.AllRefs:
					allListings = append(allListings, steps[i].Output)
				case base == "" && len(op.Refs) == 0 && !slices.Contains(op.Args, "--") && len(nonFlags(op.Args)) == 0:
					if m := logHash.FindStringSubmatch(steps[i].Output); m != nil {
						base, inf.BaseCommit = m[1], m[1]
					}
				}
			}
		}
		if inf.Workdir == "" && known.Workdir == "" && len(n.Writes) > 0 {
			if d := topDir(n.Writes[0]); d != "" {
				inf.Workdir = d
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

func nonFlags(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
		}
	}
	return out
}

// topDir is /x of /x/y/z, unless /x is a system directory.
func topDir(p string) string {
	if !path.IsAbs(p) {
		return ""
	}
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 3)
	if len(parts) < 2 {
		return ""
	}
	switch parts[0] {
	case "tmp", "usr", "etc", "opt", "var", "root", "home", "dev", "proc", "sys", "bin", "lib", "mnt", "srv", "run":
		return ""
	}
	return "/" + parts[0]
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
func cwdAfter(n monitor.Normalized, cwd string) string {
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
