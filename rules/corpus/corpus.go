package corpus

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/rollcage/rollcage/normalize"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/toolcall"
)

// Line is one labelled example of a rules corpus (JSONL). A line
// with History is a sequence; its label applies to Call, the last call.
// Task and Sandbox are given inline or by TaskRef into a contexts file.
type Line struct {
	ID       string          `json:"id"`
	Category string          `json:"category"` // a rules category for hacks; "benign" for benign lines
	TaskRef  string          `json:"task_ref,omitempty"`
	Task     json.RawMessage `json:"task,omitempty"`
	Sandbox  json.RawMessage `json:"sandbox,omitempty"`
	Cwd      string          `json:"cwd,omitempty"`
	History  []toolcall.Call `json:"history,omitempty"`
	Call     toolcall.Call   `json:"call"`
}

// Context is the shared task and sandbox facts a line's TaskRef names.
type Context struct {
	Task    json.RawMessage `json:"task"`
	Sandbox json.RawMessage `json:"sandbox"`
}

// Facts returns l's task and sandbox facts: each as given inline, or else
// its TaskRef's in contexts. ok is false when l names a TaskRef contexts
// does not hold.
func (l Line) Facts(contexts map[string]Context) (task, sandbox json.RawMessage, ok bool) {
	task, sandbox = l.Task, l.Sandbox
	if l.TaskRef == "" {
		return task, sandbox, true
	}
	c, ok := contexts[l.TaskRef]
	if task == nil {
		task = c.Task
	}
	if sandbox == nil {
		sandbox = c.Sandbox
	}
	return task, sandbox, ok
}

// Report is the outcome of running a labelled corpus through
// Normalize and the rules.
type Report struct {
	Hacks    int `json:"hacks"`
	Detected int `json:"detected"` // hack lines with at least one flag
	// Matched counts hack lines flagged with their own category.
	Matched     int                        `json:"matched"`
	Recall      float64                    `json:"recall"`
	PerCategory map[string]*CategoryRecall `json:"per_category"`

	Benign         int     `json:"benign"`
	BenignFlagged  int     `json:"benign_flagged"`
	BenignFlagRate float64 `json:"benign_flag_rate"`

	Misses         []Result `json:"misses,omitempty"`
	FalsePositives []Result `json:"false_positives,omitempty"`
}

// CategoryRecall is recall within one labelled category.
type CategoryRecall struct {
	Total    int     `json:"total"`
	Detected int     `json:"detected"`
	Matched  int     `json:"matched"`
	Recall   float64 `json:"recall"`
}

// Result is one line's outcome, kept for misses and false positives.
type Result struct {
	ID       string   `json:"id"`
	Category string   `json:"category"`
	Raw      string   `json:"raw"`
	Rules    []string `json:"rules,omitempty"`
}

// Option varies one corpus evaluation.
type Option func(*options)

type options struct {
	contexts io.Reader
}

// WithContexts supplies the contexts file (a JSON object of task_ref →
// {task, sandbox}) that lines with task_ref resolve against.
func WithContexts(r io.Reader) Option { return func(o *options) { o.contexts = r } }

// Evaluator runs labelled corpora through the normalizer and the rules,
// as `rollcage rules eval` does. Rules is required.
type Evaluator struct {
	Rules *rules.Engine
}

// EvalDir evaluates the corpus in dir (ReadDir): its case files, or
// hacks.jsonl and benign.jsonl, resolving task_ref against
// dir/contexts.json when present.
func (ev Evaluator) EvalDir(ctx context.Context, dir string) (Report, error) {
	lines, contexts, err := ReadDir(dir)
	if err != nil {
		return Report{}, err
	}
	return ev.evalLines(ctx, contexts, lines)
}

// ReadContexts decodes a contexts.json: task_ref to the task and sandbox
// contexts its lines are evaluated with.
func ReadContexts(r io.Reader) (map[string]Context, error) {
	contexts := map[string]Context{}
	if err := json.NewDecoder(r).Decode(&contexts); err != nil {
		return nil, fmt.Errorf("corpus: contexts: %w; want a JSON object of task_ref to {task, sandbox}", err)
	}
	return contexts, nil
}

// LoadContexts is ReadContexts of the file at path.
func LoadContexts(path string) (map[string]Context, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	defer f.Close()
	return ReadContexts(f)
}

// Eval runs every line of hacks and benign through Normalize and the
// rules, history included, and reports recall per category and the benign
// flag rate. A hack counts as detected when any flag is raised on its final
// call; Matched additionally requires a flag of its own category.
func (ev Evaluator) Eval(ctx context.Context, hacks, benign io.Reader, opts ...Option) (Report, error) {
	if ev.Rules == nil {
		return Report{}, errors.New("corpus: Evaluator needs Rules: set it")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	contexts := map[string]Context{}
	if o.contexts != nil {
		var err error
		if contexts, err = ReadContexts(o.contexts); err != nil {
			return Report{}, err
		}
	}
	hl, err := Read(hacks, "hacks")
	if err != nil {
		return Report{}, err
	}
	bl, err := Read(benign, "benign")
	if err != nil {
		return Report{}, err
	}
	for i := range bl {
		bl[i].Category = Benign
	}
	return ev.evalLines(ctx, contexts, append(hl, bl...))
}

// Benign is the category of a benign line.
const Benign = "benign"

// evalLines runs lines through Normalize and the rules: those of category
// Benign as benign calls, the others as hacks of their category.
func (ev Evaluator) evalLines(ctx context.Context, contexts map[string]Context, lines []Line) (Report, error) {
	rep := Report{PerCategory: map[string]*CategoryRecall{}}
	for _, l := range lines {
		flags, raw, err := ev.evalLine(ctx, contexts, l)
		if err != nil {
			return rep, fmt.Errorf("corpus: %s: %w", l.ID, err)
		}
		if l.Category == Benign {
			rep.Benign++
			if len(flags) > 0 {
				rep.BenignFlagged++
				rep.FalsePositives = append(rep.FalsePositives, Result{ID: l.ID, Category: l.Category, Raw: raw, Rules: ruleIDs(flags)})
			}
			continue
		}
		c := rep.PerCategory[l.Category]
		if c == nil {
			c = &CategoryRecall{}
			rep.PerCategory[l.Category] = c
		}
		rep.Hacks++
		c.Total++
		if len(flags) == 0 {
			rep.Misses = append(rep.Misses, Result{ID: l.ID, Category: l.Category, Raw: raw})
			continue
		}
		rep.Detected++
		c.Detected++
		for _, f := range flags {
			if f.Category == l.Category {
				rep.Matched++
				c.Matched++
				break
			}
		}
	}
	rep.Recall = ratio(rep.Detected, rep.Hacks)
	rep.BenignFlagRate = ratio(rep.BenignFlagged, rep.Benign)
	for _, c := range rep.PerCategory {
		c.Recall = ratio(c.Detected, c.Total)
	}
	return rep, nil
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func ruleIDs(flags []rules.Flag) []string {
	ids := make([]string, 0, len(flags))
	for _, f := range flags {
		if len(ids) == 0 || ids[len(ids)-1] != f.Rule {
			ids = append(ids, f.Rule)
		}
	}
	return ids
}

// Read returns the lines of one corpus file (name is for messages and the
// ids of lines without one: "hacks:12"). Blank lines and // comments are
// skipped.
func Read(r io.Reader, name string) ([]Line, error) {
	var out []Line
	err := eachLine(r, name, func(l Line) error { out = append(out, l); return nil })
	return out, err
}

func eachLine(r io.Reader, name string, fn func(Line) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "//") {
			continue
		}
		var l Line
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			return fmt.Errorf("corpus: %s line %d: %w; each line is one JSON object", name, n, err)
		}
		if l.ID == "" {
			l.ID = fmt.Sprintf("%s:%d", name, n)
		}
		if err := fn(l); err != nil {
			return fmt.Errorf("corpus: %s line %d (%s): %w", name, n, l.ID, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("corpus: read %s: %w", name, err)
	}
	return nil
}

func (ev Evaluator) evalLine(ctx context.Context, contexts map[string]Context, l Line) ([]rules.Flag, string, error) {
	task, sb, ok := l.Facts(contexts)
	if !ok {
		return nil, "", fmt.Errorf("task_ref %q not in the contexts file; add it there or give task and sandbox inline", l.TaskRef)
	}
	var taskV, sbV any
	if err := unmarshalOpt(task, &taskV); err != nil {
		return nil, "", fmt.Errorf("task: %w", err)
	}
	if err := unmarshalOpt(sb, &sbV); err != nil {
		return nil, "", fmt.Errorf("sandbox: %w", err)
	}
	cwd := l.Cwd
	if cwd == "" {
		if m, ok := taskV.(map[string]any); ok {
			cwd, _ = m["workdir"].(string)
		}
		if cwd == "" {
			cwd = "/workspace"
		}
	}
	ep := ev.Rules.NewEpisode(ctx, taskV, sbV)
	// The line's own files: a script written by one call and run by a
	// later one is read as the monitor reads it online.
	var files normalize.Files
	for _, h := range l.History {
		n := files.Replay(h, cwd)
		flags, err := ep.Eval(ctx, h, n)
		if err != nil {
			return nil, "", err
		}
		ep.Record(h, n, flags, rules.Shown{})
	}
	n := files.Replay(l.Call, cwd)
	flags, err := ep.Eval(ctx, l.Call, n)
	return flags, n.Raw, err
}

func unmarshalOpt(b json.RawMessage, v *any) error {
	if len(b) == 0 {
		*v = map[string]any{}
		return nil
	}
	return json.Unmarshal(b, v)
}

// Write prints the report as a text table followed by misses and false
// positives.
func (r Report) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "category\tlines\tflagged\trecall\tsame category\t\n")
	cats := make([]string, 0, len(r.PerCategory))
	for c := range r.PerCategory {
		cats = append(cats, c)
	}
	sort.Strings(cats)
	for _, c := range cats {
		p := r.PerCategory[c]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%.3f\t\n", c, p.Total, p.Detected, p.Recall, ratio(p.Matched, p.Total))
	}
	fmt.Fprintf(tw, "all hacks\t%d\t%d\t%.3f\t%.3f\t\n", r.Hacks, r.Detected, r.Recall, ratio(r.Matched, r.Hacks))
	fmt.Fprintf(tw, "benign\t%d\t%d\t%.3f\t\t\n", r.Benign, r.BenignFlagged, r.BenignFlagRate)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range r.Misses {
		if _, err := fmt.Fprintf(w, "MISS %s [%s] %s\n", m.ID, m.Category, oneLine(m.Raw)); err != nil {
			return err
		}
	}
	for _, f := range r.FalsePositives {
		if _, err := fmt.Fprintf(w, "FALSE POSITIVE %s %v %s\n", f.ID, f.Rules, oneLine(f.Raw)); err != nil {
			return err
		}
	}
	return nil
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > 140 {
		s = s[:137] + "..."
	}
	return s
}
