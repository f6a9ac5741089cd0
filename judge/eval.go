package judge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"
)

// Labels of an EvalItem.
const (
	LabelHack   = "hack"
	LabelBenign = "benign"
)

// EvalItem is one line of an eval data file: a flagged call with the
// truth about it. For a benign item Category names the category the
// rules would flag it under (its look-alike).
type EvalItem struct {
	ID       string  `json:"id"`
	Label    string  `json:"label"`
	Category string  `json:"category"`
	Request  Request `json:"request"`
}

// EvalResult is the judge's verdict on one item.
type EvalResult struct {
	ID       string  `json:"id"`
	Label    string  `json:"label"`
	Category string  `json:"category"`
	Verdict  Verdict `json:"verdict"`
}

// Correct reports whether the verdict matches the label; an undecided
// verdict is never correct.
func (r EvalResult) Correct() bool {
	return !r.Verdict.Undecided && r.Verdict.Hack == (r.Label == LabelHack)
}

// EvalScore are the counts and metrics of a set of items. An undecided
// verdict confirms nothing: on a hack it counts against recall, on any
// item against accuracy, and never as a false positive.
type EvalScore struct {
	Name            string `json:"name"`
	N               int    `json:"n"`
	TP              int    `json:"tp"`
	FP              int    `json:"fp"`
	TN              int    `json:"tn"`
	FN              int    `json:"fn"`
	UndecidedHack   int    `json:"undecided_hack"`
	UndecidedBenign int    `json:"undecided_benign"`
	// CategoryMatch counts true positives whose verdict names the item's
	// category.
	CategoryMatch int `json:"category_match"`

	Precision float64 `json:"precision"` // TP / (TP+FP); 0 when nothing was called a hack
	Recall    float64 `json:"recall"`    // TP / hacks
	F1        float64 `json:"f1"`
	Accuracy  float64 `json:"accuracy"` // (TP+TN) / N

	LatencyP50       time.Duration `json:"latency_p50"`
	LatencyP90       time.Duration `json:"latency_p90"`
	LatencyP99       time.Duration `json:"latency_p99"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
}

// Undecided is the number of undecided verdicts.
func (s EvalScore) Undecided() int { return s.UndecidedHack + s.UndecidedBenign }

// EvalReport is the outcome of Eval.
type EvalReport struct {
	Overall    EvalScore    `json:"overall"`
	Categories []EvalScore  `json:"categories"` // by name
	Results    []EvalResult `json:"results"`    // in input order
}

// ReadEval parses eval data: JSONL of EvalItem, blank lines and lines
// starting with # ignored.
func ReadEval(r io.Reader) ([]EvalItem, error) {
	var items []EvalItem
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var it EvalItem
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&it); err != nil {
			return nil, fmt.Errorf("judge eval: line %d: %w: each line must be one JSON object {id, label, category, request}", n, err)
		}
		switch {
		case it.ID == "":
			return nil, fmt.Errorf("judge eval: line %d: id is empty: give every item a unique id", n)
		case it.Label != LabelHack && it.Label != LabelBenign:
			return nil, fmt.Errorf("judge eval: line %d (%s): label %q: use %q or %q", n, it.ID, it.Label, LabelHack, LabelBenign)
		case seen[it.ID] != 0:
			return nil, fmt.Errorf("judge eval: line %d: id %q already used on line %d: make ids unique", n, it.ID, seen[it.ID])
		}
		seen[it.ID] = n
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("judge eval: read: %w", err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("judge eval: no items: the data must hold JSONL lines {id, label, category, request}")
	}
	return items, nil
}

// Eval runs j on every labelled item of data, concurrency at a time, and
// scores the verdicts overall and per category.
func Eval(ctx context.Context, j Judge, data io.Reader, concurrency int) (EvalReport, error) {
	items, err := ReadEval(data)
	if err != nil {
		return EvalReport{}, err
	}
	results := make([]EvalResult, len(items))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	for i, it := range items {
		g.Go(func() error {
			v, err := j.Judge(gctx, it.Request)
			if err != nil {
				return fmt.Errorf("judge eval: item %s: %w", it.ID, err)
			}
			results[i] = EvalResult{ID: it.ID, Label: it.Label, Category: it.Category, Verdict: v}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return EvalReport{}, err
	}
	return Score(results), nil
}

// Score computes the report of a set of results.
func Score(results []EvalResult) EvalReport {
	rep := EvalReport{Results: results, Overall: scoreOf("all", results)}
	byCat := map[string][]EvalResult{}
	for _, r := range results {
		c := r.Category
		if c == "" {
			c = "(none)"
		}
		byCat[c] = append(byCat[c], r)
	}
	for c, rs := range byCat {
		rep.Categories = append(rep.Categories, scoreOf(c, rs))
	}
	slices.SortFunc(rep.Categories, func(a, b EvalScore) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return rep
}

func scoreOf(name string, rs []EvalResult) EvalScore {
	s := EvalScore{Name: name, N: len(rs)}
	lat := make([]time.Duration, 0, len(rs))
	for _, r := range rs {
		v := r.Verdict
		hack := r.Label == LabelHack
		switch {
		case v.Undecided && hack:
			s.UndecidedHack++
		case v.Undecided:
			s.UndecidedBenign++
		case hack && v.Hack:
			s.TP++
			if v.Category == r.Category {
				s.CategoryMatch++
			}
		case hack:
			s.FN++
		case v.Hack:
			s.FP++
		default:
			s.TN++
		}
		s.PromptTokens += v.PromptTokens
		s.CompletionTokens += v.CompletionTokens
		lat = append(lat, v.Latency)
	}
	s.Precision, s.Recall, s.F1, s.Accuracy = metrics(s.TP, s.FP, s.TN, s.FN, s.UndecidedHack, s.UndecidedBenign)
	slices.Sort(lat)
	s.LatencyP50, s.LatencyP90, s.LatencyP99 = rankPct(lat, 0.50), rankPct(lat, 0.90), rankPct(lat, 0.99)
	return s
}

// metrics from the confusion counts; a ratio with a zero denominator is 0.
func metrics(tp, fp, tn, fn, undHack, undBenign int) (precision, recall, f1, accuracy float64) {
	ratio := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	precision = ratio(tp, tp+fp)
	recall = ratio(tp, tp+fn+undHack)
	if precision+recall > 0 {
		f1 = 2 * precision * recall / (precision + recall)
	}
	accuracy = ratio(tp+tn, tp+fp+tn+fn+undHack+undBenign)
	return
}

// rankPct is the nearest-rank percentile of sorted values.
func rankPct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Write prints the report as a text table, then the items misjudged.
func (r EvalReport) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "category\tn\ttp\tfp\ttn\tfn\tundecided\tprecision\trecall\tf1\taccuracy\tp50\tp90\tp99\ttokens in/out\t")
	row := func(s EvalScore) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\t%d/%d\t\n",
			s.Name, s.N, s.TP, s.FP, s.TN, s.FN, s.Undecided(), s.Precision, s.Recall, s.F1, s.Accuracy,
			fmtDur(s.LatencyP50), fmtDur(s.LatencyP90), fmtDur(s.LatencyP99), s.PromptTokens, s.CompletionTokens)
	}
	for _, s := range r.Categories {
		row(s)
	}
	row(r.Overall)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("judge eval: write report: %w", err)
	}
	var bad []EvalResult
	for _, res := range r.Results {
		if !res.Correct() {
			bad = append(bad, res)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nmisjudged (%d):\n", len(bad))
	for _, res := range bad {
		got := "benign"
		switch {
		case res.Verdict.Undecided:
			got = "undecided (" + res.Verdict.Err + ")"
		case res.Verdict.Hack:
			got = fmt.Sprintf("hack/%s %.2f", res.Verdict.Category, res.Verdict.Confidence)
		default:
			got = fmt.Sprintf("benign %.2f", res.Verdict.Confidence)
		}
		if why := res.Verdict.Rationale; why != "" {
			got += ": " + clip(why, 160)
		}
		if _, err := fmt.Fprintf(w, "  %s [%s %s] judged %s\n", res.ID, res.Label, res.Category, got); err != nil {
			return fmt.Errorf("judge eval: write report: %w", err)
		}
	}
	return nil
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}
