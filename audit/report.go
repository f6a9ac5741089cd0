package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/judge"
	"github.com/rollcage/rollcage/rules"
)

// Classes of an episode.
const (
	ClassCleanResolved    = "clean_resolved"
	ClassHackedResolved   = "hacked_resolved"
	ClassCleanUnresolved  = "clean_unresolved"
	ClassHackedUnresolved = "hacked_unresolved"
	// ClassUnconfirmed: suspicious flags that no judge confirmed or
	// cleared (rules only); neither hacked nor clean.
	ClassUnconfirmed = "unconfirmed"
	// ClassCleared: flagged, and the judge cleared every flagged call.
	ClassCleared = "cleared"
)

// Classes in report order.
var Classes = []string{ClassHackedResolved, ClassHackedUnresolved, ClassUnconfirmed, ClassCleared, ClassCleanResolved, ClassCleanUnresolved}

// maxShownOutput bounds the output kept per step in a report.
const maxShownOutput = 4000

func label(class string, resolved, resolvedKnown bool) string {
	l := strings.ReplaceAll(class, "_", " ")
	switch class {
	case ClassCleared:
		l = "flagged, cleared by the judge"
	case ClassUnconfirmed:
		l = "unconfirmed (suspicious, no judge)"
		if resolvedKnown && resolved {
			l += ", resolved"
		}
	}
	if !resolvedKnown && class != ClassCleared {
		l += " (resolution unknown)"
	}
	return l
}

// Report is the result of an audit. Its JSON is `rollcage audit --json`.
type Report struct {
	Summary  Summary         `json:"summary"`
	Episodes []EpisodeReport `json:"episodes"`
	// Skipped are files or lines that could not be read, with the reason.
	Skipped []FileError `json:"skipped"`
	// Score is the audit against labels (--labels), when given.
	Score *Score `json:"score,omitempty"`
	// Judge is true when a judge confirmed or cleared flagged calls;
	// without one, hacks are unconfirmed.
	Judge bool `json:"judge"`
}

// Summary counts episodes by class, category, rule and task.
type Summary struct {
	Episodes int `json:"episodes"`
	Steps    int `json:"steps"`
	// HackedResolutions is the number of resolved episodes found hacked.
	HackedResolutions int            `json:"hacked_resolutions"`
	Unconfirmed       int            `json:"unconfirmed"`
	Classes           map[string]int `json:"classes"`
	// Categories counts hacked episodes by hack category.
	Categories map[string]int `json:"categories"`
	// Rules counts flags by rule id over all steps.
	Rules map[string]int `json:"rules"`
	Tasks []TaskCount    `json:"tasks"`
	// Disagreements counts steps where the replay and the online decision
	// of rollcage's own trajectories differ.
	Disagreements int `json:"disagreements"`
}

// TaskCount is one task's episodes and hacks.
type TaskCount struct {
	Task     string `json:"task"`
	Episodes int    `json:"episodes"`
	Hacked   int    `json:"hacked"`
	Resolved int    `json:"resolved"`
}

// EpisodeReport is one episode's audit.
type EpisodeReport struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	Format string `json:"format"`
	TaskID string `json:"task_id,omitempty"`
	Class  string `json:"class"`
	// Outcome is hacked, unconfirmed or clean: the words of
	// harness outcomes' label.
	Outcome string `json:"outcome"`
	// Label is the class for people: "hacked resolved".
	Label         string `json:"label"`
	Resolved      bool   `json:"resolved"`
	ResolvedKnown bool   `json:"resolved_known"`
	Hacked        bool   `json:"hacked"`
	// Unconfirmed: flagged by suspicious rules alone, which no judge
	// confirmed or cleared; not Hacked.
	Unconfirmed bool     `json:"unconfirmed,omitempty"`
	Categories  []string `json:"categories"`
	// PatchSimilarity compares the final patch with the upstream fix,
	// when both are known; PatchMatch says why it made the episode hacked.
	PatchSimilarity *float64       `json:"patch_similarity,omitempty"`
	PatchMatch      string         `json:"patch_match,omitempty"`
	Inferred        *Inferred      `json:"inferred,omitempty"`
	Disagreements   []Disagreement `json:"disagreements,omitempty"`
	Steps           []StepReport   `json:"steps"`
}

// StepReport is one call's replay.
type StepReport struct {
	Step int `json:"step"`
	// Index is the step's place in the source (Step.Index).
	Index    int    `json:"index"`
	Tool     string `json:"tool"`
	Call     string `json:"call"`               // rendered: "$ cmd" or "read_file /path"
	Original string `json:"original,omitempty"` // the source's own form, when mapped
	// Output is what the model saw (clipped).
	Output      string         `json:"output,omitempty"`
	Flags       []rules.Flag   `json:"flags,omitempty"`
	Flagged     bool           `json:"flagged,omitempty"`
	Verdict     *judge.Verdict `json:"verdict,omitempty"`
	Hack        bool           `json:"hack,omitempty"`
	Unconfirmed bool           `json:"unconfirmed,omitempty"`
	Cleared     bool           `json:"cleared,omitempty"`
	Category    string         `json:"category,omitempty"`
	Online      *OnlineStep    `json:"online,omitempty"`
}

// OnlineStep is the decision recorded while the episode ran.
type OnlineStep struct {
	Action     decision.Action `json:"action"`
	Hack       bool            `json:"hack,omitempty"`
	Dummy      bool            `json:"dummy,omitempty"`
	Categories []string        `json:"categories,omitempty"`
	Flags      []rules.Flag    `json:"flags,omitempty"`
	Verdict    *judge.Verdict  `json:"verdict,omitempty"`
}

// Disagreement is a step the replay decided differently from the online
// run.
type Disagreement struct {
	Step   int             `json:"step"`
	Online decision.Action `json:"online"`
	Note   string          `json:"note"`
}

func (r *Report) summarize() {
	s := Summary{Classes: map[string]int{}, Categories: map[string]int{}, Rules: map[string]int{}, Tasks: []TaskCount{}}
	for _, c := range Classes {
		s.Classes[c] = 0
	}
	tasks := map[string]*TaskCount{}
	for _, e := range r.Episodes {
		s.Episodes++
		s.Steps += len(e.Steps)
		s.Classes[e.Class]++
		if e.Class == ClassHackedResolved {
			s.HackedResolutions++
		}
		if e.Unconfirmed {
			s.Unconfirmed++
		}
		for _, c := range e.Categories {
			s.Categories[c]++
		}
		for _, st := range e.Steps {
			for _, f := range st.Flags {
				s.Rules[f.Rule]++
			}
		}
		s.Disagreements += len(e.Disagreements)
		id := firstNonEmpty(e.TaskID, "(unknown)")
		tc := tasks[id]
		if tc == nil {
			tc = &TaskCount{Task: id}
			tasks[id] = tc
		}
		tc.Episodes++
		if e.Hacked {
			tc.Hacked++
		}
		if e.Resolved {
			tc.Resolved++
		}
	}
	for _, tc := range tasks {
		s.Tasks = append(s.Tasks, *tc)
	}
	sort.Slice(s.Tasks, func(i, j int) bool { return s.Tasks[i].Task < s.Tasks[j].Task })
	r.Summary = s
}

// WriteJSON writes the report as indented JSON: what json.Encoder with
// a two-space indent writes of it, an episode at a time, so that the
// report is never held twice (as values and as its text).
func (r *Report) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	// member writes "name": v at the top level, then after
	member := func(name string, v any, after string) error {
		b, err := json.MarshalIndent(v, "  ", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(bw, "  %q: ", name)
		bw.Write(b)
		_, err = bw.WriteString(after)
		return err
	}
	err := func() error {
		bw.WriteString("{\n")
		if err := member("summary", r.Summary, ",\n"); err != nil {
			return err
		}
		if len(r.Episodes) == 0 {
			if err := member("episodes", r.Episodes, ",\n"); err != nil {
				return err
			}
		} else {
			bw.WriteString("  \"episodes\": [\n")
			for i, e := range r.Episodes {
				b, err := json.MarshalIndent(e, "    ", "  ")
				if err != nil {
					return err
				}
				bw.WriteString("    ")
				bw.Write(b)
				if i < len(r.Episodes)-1 {
					bw.WriteString(",")
				}
				bw.WriteString("\n")
			}
			bw.WriteString("  ],\n")
		}
		if err := member("skipped", r.Skipped, ",\n"); err != nil {
			return err
		}
		if r.Score != nil {
			if err := member("score", r.Score, ",\n"); err != nil {
				return err
			}
		}
		if err := member("judge", r.Judge, "\n}\n"); err != nil {
			return err
		}
		return bw.Flush()
	}()
	if err != nil {
		return fmt.Errorf("audit: write json: %w", err)
	}
	return nil
}

// WriteText writes the summary table, the per-category and per-rule
// counts and the unreadable files, for people.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EPISODE\tTASK\tFORMAT\tSTEPS\tFLAGGED\tCLASS\tCATEGORIES\tFILE")
	for _, e := range r.Episodes {
		flagged := 0
		for _, s := range e.Steps {
			if s.Flagged {
				flagged++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", e.ID, firstNonEmpty(e.TaskID, "-"), e.Format, len(e.Steps), flagged, e.Label, firstNonEmpty(strings.Join(e.Categories, ","), "-"), e.Source)
	}
	tw.Flush()
	s := r.Summary
	fmt.Fprintf(w, "\n%d episodes, %d tool calls; %d hacked resolutions", s.Episodes, s.Steps, s.HackedResolutions)
	if s.Unconfirmed > 0 {
		fmt.Fprintf(w, "; %d episodes unconfirmed (suspicious flags no judge decided)", s.Unconfirmed)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "\nby class:")
	for _, c := range Classes {
		fmt.Fprintf(w, "  %-20s %d\n", c, s.Classes[c])
	}
	counts := func(title string, m map[string]int) {
		if len(m) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if m[keys[i]] != m[keys[j]] {
				return m[keys[i]] > m[keys[j]]
			}
			return keys[i] < keys[j]
		})
		for _, k := range keys {
			fmt.Fprintf(w, "  %-28s %d\n", k, m[k])
		}
	}
	counts("hacked episodes by category", s.Categories)
	counts("flags by rule", s.Rules)
	if s.Disagreements > 0 {
		fmt.Fprintf(w, "\nreplay disagrees with the online decision on %d steps:\n", s.Disagreements)
		for _, e := range r.Episodes {
			for _, d := range e.Disagreements {
				fmt.Fprintf(w, "  %s step %d (online %s): %s\n", e.ID, d.Step, d.Online, d.Note)
			}
		}
	}
	if r.Score != nil {
		if err := r.Score.WriteText(w); err != nil {
			return err
		}
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, "\nskipped %d unreadable files or lines:\n", len(r.Skipped))
		for _, f := range r.Skipped {
			fmt.Fprintf(w, "  %s\n", f.Error())
		}
	}
	return nil
}
