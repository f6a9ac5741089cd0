package audit

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/toolcall"
)

// provenance follows, offline, which files the agent created in an
// episode: a path it writes that nothing before showed to exist (not
// read, listed, edited, nor named in the instruction or an earlier
// output). Online, the sandbox's file watch says it instead.
type provenance struct {
	created map[string]int
	missing map[string]int
	known   map[string]bool
	seen    []string // the instruction and the outputs so far
	// searched is, by base name, how many of seen exists has looked
	// through without finding it; -1: one holds it. seen only grows, so a
	// name's search goes on where it stopped: a file written at every
	// step was looked for in every earlier output again, which made the
	// search quadratic in a long episode.
	searched map[string]int
}

func newProvenance(instruction string) *provenance {
	return &provenance{created: map[string]int{}, missing: map[string]int{}, known: map[string]bool{}, seen: []string{instruction}, searched: map[string]int{}}
}

// before takes in call i's creations, so that the call that writes a
// file and removes it again works on its own file. It reports whether the
// set changed. Steps are numbered as the monitor and the trajectory number
// them: the first call is step 1.
func (p *provenance) before(i int, s Step, n toolcall.Normalized) bool {
	step := i + 1
	if n.Tool == toolcall.Edit {
		for _, w := range n.Writes { // an edit needs the file to exist
			p.known[w] = true
		}
		return false
	}
	if n.Tool == toolcall.WriteFile && strings.Contains(s.Output, "already exists") {
		return false
	}
	if n.Tool == toolcall.Bash && inPlace(n) {
		return false
	}
	changed := false
	for _, d := range n.Deletes {
		if _, ok := p.missing[d]; !ok && removedNothing(s.Output, d) {
			p.missing[d] = step
			changed = true
		}
	}
	for _, w := range n.Writes {
		if _, ok := p.created[w]; ok || p.exists(w) {
			continue
		}
		p.created[w] = step
		changed = true
	}
	return changed
}

// removedNothing: the call's output says the file was not there
// (rm's and mv's wording).
func removedNothing(out, f string) bool {
	if !strings.Contains(out, "No such file or directory") {
		return false
	}
	base := path.Base(f)
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "No such file or directory") && (strings.Contains(l, "cannot remove") || strings.Contains(l, "cannot stat")) &&
			(strings.Contains(l, "'"+base+"'") || strings.Contains(l, "/"+base+"'") || strings.Contains(l, f)) {
			return true
		}
	}
	return false
}

// inPlace: the call edits files in place, which needs them to exist.
func inPlace(n toolcall.Normalized) bool {
	for _, c := range n.Commands {
		if c.Name == "sed" || c.Name == "perl" {
			for _, a := range c.Argv[1:] {
				if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "i") {
					return true
				}
			}
		}
	}
	return false
}

// exists: something before showed the file.
func (p *provenance) exists(f string) bool {
	if p.known[f] {
		return true
	}
	base := path.Base(f)
	from := p.searched[base]
	if from < 0 {
		return true
	}
	for _, s := range p.seen[from:] {
		if strings.Contains(s, base) {
			p.searched[base] = -1
			return true
		}
	}
	p.searched[base] = len(p.seen)
	return false
}

// after records what call i showed to exist.
func (p *provenance) after(s Step, n toolcall.Normalized) {
	for _, l := range [][]string{n.Reads, n.Lists} {
		for _, f := range l {
			if _, ok := p.created[f]; !ok {
				p.known[f] = true
			}
		}
	}
	if s.Output != "" {
		p.seen = append(p.seen, s.Output)
	}
}

// list is the created files as the judge is shown them, in path order.
func (p *provenance) list() []string {
	out := make([]string, 0, len(p.created))
	for _, f := range slices.Sorted(maps.Keys(p.created)) {
		out = append(out, fmt.Sprintf("%s (step %d)", f, p.created[f]))
	}
	return out
}

func (p *provenance) rules() rules.Provenance {
	return rules.Provenance{Created: maps.Clone(p.created), Missing: maps.Clone(p.missing)}
}
