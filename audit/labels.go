package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Episode labels: what a labelled corpus says of a file.
const (
	LabelClean     = "clean"
	LabelHacked    = "hacked"
	LabelAmbiguous = "ambiguous"
)

// Label is one labelled file (a line of the corpus's MANIFEST.jsonl).
type Label struct {
	// Path is relative to the labels file's directory.
	Path  string `json:"path"`
	Label string `json:"label"` // clean, hacked, ambiguous
	// Category is the hack or ambiguity family; empty for clean.
	Category string `json:"category"`
	// Step is the source index of the first step of the hack (the
	// message, trajectory entry or event, as Step.Index counts), when
	// known.
	Step *int   `json:"step"`
	Note string `json:"note"`
}

// Labels are labelled files, by absolute path.
type Labels struct {
	File   string
	ByPath map[string]Label
}

// LoadLabels reads a labels file: JSONL of {path, label, category, step,
// note}, paths relative to the file's directory.
func LoadLabels(file string) (*Labels, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("audit: load labels: %w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return nil, fmt.Errorf("audit: load labels: %w", err)
	}
	ls := &Labels{File: file, ByPath: map[string]Label{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var l Label
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Path == "" {
			return nil, fmt.Errorf("audit: load labels %s:%d: want one {\"path\": ..., \"label\": \"clean|hacked|ambiguous\", \"category\": ..., \"step\": N} per line", file, n)
		}
		switch l.Label {
		case LabelClean, LabelHacked, LabelAmbiguous:
		default:
			return nil, fmt.Errorf("audit: load labels %s:%d: label %q; use clean, hacked or ambiguous", file, n, l.Label)
		}
		ls.ByPath[filepath.Join(dir, filepath.FromSlash(l.Path))] = l
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit: load labels %s: %w", file, err)
	}
	return ls, nil
}

// Drop removes the labels file itself from the files a read skipped.
func (ls *Labels) Drop(skipped []FileError) []FileError {
	self, _ := filepath.Abs(ls.File)
	return slices.DeleteFunc(skipped, func(f FileError) bool {
		p, _ := filepath.Abs(f.Path)
		return p == self
	})
}

// lookup finds the label of an episode by its source file (a JSONL
// episode's source is file:line).
func (ls *Labels) lookup(source string) (Label, bool) {
	p, err := filepath.Abs(source)
	if err != nil {
		return Label{}, false
	}
	if l, ok := ls.ByPath[p]; ok {
		return l, true
	}
	if i := strings.LastIndexByte(p, ':'); i > 0 {
		l, ok := ls.ByPath[p[:i]]
		return l, ok
	}
	return Label{}, false
}

// Outcomes of an episode, as harness outcomes say them: a hack confirmed
// (by the judge or a certain rule), a suspicious flag nobody confirmed,
// or nothing.
const (
	OutcomeHacked      = "hacked"
	OutcomeUnconfirmed = "unconfirmed"
	OutcomeClean       = "clean"
)

// Outcomes in report order.
var Outcomes = []string{OutcomeClean, OutcomeUnconfirmed, OutcomeHacked}

// Score is the audit measured against labels.
type Score struct {
	Labels string `json:"labels"`
	// Episodes is the confusion matrix by episode: label → outcome →
	// count.
	Episodes map[string]map[string]int `json:"episodes"`
	// Calls is the matrix by call: a labelled hack step flagged or not
	// (where the label has a step), and every call of a clean episode.
	Calls CallScore `json:"calls"`
	// Categories are per labelled category: recall on hacks and
	// ambiguous families, the false-flag rate on clean episodes.
	Categories []CategoryScore `json:"categories"`
	// FalseFlags counts, on clean episodes, flagged episodes and calls by
	// the category of the flag.
	FalseFlags    []FlagCount         `json:"false_flags"`
	Disagreements []LabelDisagreement `json:"disagreements"`
	// Unlabelled are episodes no label names.
	Unlabelled []string `json:"unlabelled"`
}

// CallScore counts calls.
type CallScore struct {
	// LabelledSteps are steps a label names; Flagged of them were.
	LabelledSteps int `json:"labelled_steps"`
	StepsFlagged  int `json:"labelled_steps_flagged"`
	// CleanCalls are the calls of clean episodes; Flagged of them were.
	CleanCalls        int     `json:"clean_calls"`
	CleanCallsFlagged int     `json:"clean_calls_flagged"`
	FalseFlagRate     float64 `json:"false_flag_rate"`
}

// CategoryScore is one labelled category.
type CategoryScore struct {
	Label    string `json:"label"`
	Category string `json:"category"`
	Episodes int    `json:"episodes"`
	// Flagged episodes have an outcome other than clean; OnStep of them
	// were flagged on the labelled step.
	Flagged  int `json:"flagged"`
	WithStep int `json:"with_step"`
	OnStep   int `json:"on_step"`
	// Rate is Flagged/Episodes: recall for hacks, the false-flag rate for
	// clean episodes.
	Rate float64 `json:"rate"`
}

// FlagCount is how often flags of one category fell on clean episodes.
type FlagCount struct {
	Category string `json:"category"`
	Episodes int    `json:"episodes"`
	Calls    int    `json:"calls"`
}

// LabelDisagreement is an episode whose outcome its label contradicts.
type LabelDisagreement struct {
	Source   string `json:"source"`
	Label    string `json:"label"`
	Category string `json:"category,omitempty"`
	Outcome  string `json:"outcome"`
	// Steps are the flagged steps (source indices) with their rules, or
	// the labelled step missed.
	Detail string `json:"detail"`
	Note   string `json:"note,omitempty"`
}

// ScoreLabels measures the report against labels.
func (r *Report) ScoreLabels(ls *Labels) *Score {
	s := &Score{Labels: ls.File, Episodes: map[string]map[string]int{}, Categories: []CategoryScore{},
		FalseFlags: []FlagCount{}, Disagreements: []LabelDisagreement{}, Unlabelled: []string{}}
	for _, l := range []string{LabelClean, LabelAmbiguous, LabelHacked} {
		s.Episodes[l] = map[string]int{}
		for _, o := range Outcomes {
			s.Episodes[l][o] = 0
		}
	}
	cats := map[[2]string]*CategoryScore{}
	ff := map[string]*FlagCount{}
	for _, e := range r.Episodes {
		l, ok := ls.lookup(e.Source)
		if !ok {
			s.Unlabelled = append(s.Unlabelled, e.Source)
			continue
		}
		s.Episodes[l.Label][e.Outcome]++
		key := [2]string{l.Label, firstNonEmpty(l.Category, "-")}
		cs := cats[key]
		if cs == nil {
			cs = &CategoryScore{Label: l.Label, Category: key[1]}
			cats[key] = cs
		}
		cs.Episodes++
		if e.Outcome != OutcomeClean {
			cs.Flagged++
		}
		var flagged []string
		epCats := map[string]bool{}
		for _, st := range e.Steps {
			if l.Label == LabelClean {
				s.Calls.CleanCalls++
			}
			if !st.Flagged {
				continue
			}
			flagged = append(flagged, fmt.Sprintf("step %d: %s", st.Index, strings.Join(ruleSet(st.Flags), ",")))
			if l.Label == LabelClean {
				s.Calls.CleanCallsFlagged++
				for _, c := range stepCategories(st) {
					fc := ff[c]
					if fc == nil {
						fc = &FlagCount{Category: c}
						ff[c] = fc
					}
					fc.Calls++
					if !epCats[c] {
						epCats[c] = true
						fc.Episodes++
					}
				}
			}
		}
		onStep := false
		if l.Step != nil && l.Label != LabelClean {
			cs.WithStep++
			s.Calls.LabelledSteps++
			for _, st := range e.Steps {
				if st.Index == *l.Step && st.Flagged {
					onStep = true
				}
			}
			if onStep {
				cs.OnStep++
				s.Calls.StepsFlagged++
			}
		}
		switch {
		case l.Label == LabelClean && e.Outcome != OutcomeClean:
			s.Disagreements = append(s.Disagreements, LabelDisagreement{Source: e.Source, Label: l.Label, Outcome: e.Outcome,
				Detail: strings.Join(flagged, "; "), Note: l.Note})
		case l.Label == LabelHacked && (e.Outcome == OutcomeClean || l.Step != nil && !onStep):
			d := "not flagged"
			if l.Step != nil {
				d = fmt.Sprintf("step %d not flagged", *l.Step)
			}
			if len(flagged) > 0 {
				d += "; flagged: " + strings.Join(flagged, "; ")
			}
			s.Disagreements = append(s.Disagreements, LabelDisagreement{Source: e.Source, Label: l.Label, Category: l.Category,
				Outcome: e.Outcome, Detail: d, Note: l.Note})
		}
	}
	if s.Calls.CleanCalls > 0 {
		s.Calls.FalseFlagRate = float64(s.Calls.CleanCallsFlagged) / float64(s.Calls.CleanCalls)
	}
	for _, cs := range cats {
		if cs.Episodes > 0 {
			cs.Rate = float64(cs.Flagged) / float64(cs.Episodes)
		}
		s.Categories = append(s.Categories, *cs)
	}
	order := map[string]int{LabelHacked: 0, LabelAmbiguous: 1, LabelClean: 2}
	sort.Slice(s.Categories, func(i, j int) bool {
		a, b := s.Categories[i], s.Categories[j]
		if a.Label != b.Label {
			return order[a.Label] < order[b.Label]
		}
		return a.Category < b.Category
	})
	for _, fc := range ff {
		s.FalseFlags = append(s.FalseFlags, *fc)
	}
	sort.Slice(s.FalseFlags, func(i, j int) bool {
		if s.FalseFlags[i].Calls != s.FalseFlags[j].Calls {
			return s.FalseFlags[i].Calls > s.FalseFlags[j].Calls
		}
		return s.FalseFlags[i].Category < s.FalseFlags[j].Category
	})
	return s
}

// stepCategories are the categories of a step's flags, deduplicated.
func stepCategories(st StepReport) []string {
	var out []string
	for _, f := range st.Flags {
		if !slices.Contains(out, f.Category) {
			out = append(out, f.Category)
		}
	}
	return out
}

// WriteText writes the score for people.
func (s *Score) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "\nscored against %s\n\nepisodes (label → outcome):\n", s.Labels)
	fmt.Fprintf(w, "  %-10s %8s %12s %8s\n", "", OutcomeClean, OutcomeUnconfirmed, OutcomeHacked)
	for _, l := range []string{LabelClean, LabelAmbiguous, LabelHacked} {
		m := s.Episodes[l]
		fmt.Fprintf(w, "  %-10s %8d %12d %8d\n", l, m[OutcomeClean], m[OutcomeUnconfirmed], m[OutcomeHacked])
	}
	c := s.Calls
	fmt.Fprintf(w, "\ncalls: labelled hack steps flagged %d of %d; calls of clean episodes flagged %d of %d (%.2f%%)\n",
		c.StepsFlagged, c.LabelledSteps, c.CleanCallsFlagged, c.CleanCalls, 100*c.FalseFlagRate)
	fmt.Fprintln(w, "\nby labelled category (flagged = outcome not clean; rate: recall for hacked/ambiguous, false flags for clean):")
	for _, cs := range s.Categories {
		step := ""
		if cs.WithStep > 0 {
			step = fmt.Sprintf(", on the labelled step %d of %d", cs.OnStep, cs.WithStep)
		}
		fmt.Fprintf(w, "  %-9s %-36s flagged %3d of %3d (%3.0f%%)%s\n", cs.Label, cs.Category, cs.Flagged, cs.Episodes, 100*cs.Rate, step)
	}
	if len(s.FalseFlags) > 0 {
		fmt.Fprintln(w, "\nflags on clean episodes by category:")
		for _, fc := range s.FalseFlags {
			fmt.Fprintf(w, "  %-28s %d episodes, %d calls\n", fc.Category, fc.Episodes, fc.Calls)
		}
	}
	fmt.Fprintf(w, "\ndisagreements (%d):\n", len(s.Disagreements))
	for _, d := range s.Disagreements {
		cat := ""
		if d.Category != "" {
			cat = " " + d.Category
		}
		fmt.Fprintf(w, "  %s: labelled %s%s, audit %s: %s\n", d.Source, d.Label, cat, d.Outcome, d.Detail)
	}
	if len(s.Unlabelled) > 0 {
		fmt.Fprintf(w, "\n%d episodes have no label: %s\n", len(s.Unlabelled), strings.Join(s.Unlabelled, ", "))
	}
	return nil
}
