package audit

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"sync"
)

//go:embed report.html.tmpl
var reportTmpl string

// tmpl is parsed on first use, not at package init: every run of the
// binary paid for it (about 1 ms of startup) and only --html uses it.
var tmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"join":    strings.Join,
		"flagged": flaggedSteps,
		"fold":    fold,
		"label":   func(c string) string { return label(c, false, true) },
		"pct": func(n, d int) string {
			if d == 0 {
				return "0%"
			}
			return fmt.Sprintf("%.0f%%", 100*float64(n)/float64(d))
		},
	}).Parse(reportTmpl))
})

// flaggedSteps counts an episode's flagged steps.
func flaggedSteps(e EpisodeReport) int {
	n := 0
	for _, s := range e.Steps {
		if s.Flagged {
			n++
		}
	}
	return n
}

// foldLines: calls longer than this (heredocs of whole files) are shown
// folded to their first line.
const foldLines = 8

// folded is a call as the report shows it.
type folded struct {
	Text, Head string
	Lines      int
	Long       bool
}

func fold(call string) folded {
	n := strings.Count(call, "\n") + 1
	head, _, _ := strings.Cut(call, "\n")
	return folded{Text: call, Head: head, Lines: n, Long: n > foldLines}
}

// bar is one bar of a chart.
type bar struct {
	Label string
	N, Of int
	Y     int     // top of the row, in SVG units
	W     float64 // bar width, in SVG units
}

// chart is an inline SVG horizontal bar chart of rates.
type chart struct {
	ID, Title string
	Bars      []bar
	Height    int
}

const chartWidth = 300

func newChart(id, title string, bars []bar) chart {
	for i := range bars {
		bars[i].Y = 8 + 24*i
		if bars[i].Of > 0 {
			bars[i].W = chartWidth * float64(bars[i].N) / float64(bars[i].Of)
		}
	}
	return chart{ID: id, Title: title, Bars: bars, Height: 16 + 24*len(bars)}
}

// WriteHTML writes the report as one self-contained HTML page (inline
// CSS, JS and SVG; it fetches nothing): the summary, charts of hack rates
// by category and by task, and per-episode timelines with flagged steps
// highlighted.
func (r *Report) WriteHTML(w io.Writer) error {
	var cats []bar
	for c, n := range r.Summary.Categories {
		cats = append(cats, bar{Label: c, N: n, Of: r.Summary.Episodes})
	}
	sort.Slice(cats, func(i, j int) bool {
		if cats[i].N != cats[j].N {
			return cats[i].N > cats[j].N
		}
		return cats[i].Label < cats[j].Label
	})
	var tasks []bar
	for _, t := range r.Summary.Tasks {
		tasks = append(tasks, bar{Label: t.Task, N: t.Hacked, Of: t.Episodes})
	}
	data := struct {
		*Report
		Classes            []string
		ByCategory, ByTask chart
	}{r, Classes,
		newChart("chart-category", "Hacked episodes by category (share of all episodes)", cats),
		newChart("chart-task", "Hack rate by task", tasks)}
	if err := tmpl().Execute(w, data); err != nil {
		return fmt.Errorf("audit: write html: %w", err)
	}
	return nil
}
