package judge

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"unicode/utf8"
)

//go:embed prompts/*.tmpl
var embedded embed.FS

// prompts holds the two parsed templates.
type prompts struct {
	system *template.Template
	user   *template.Template
}

// promptData is what the templates see. Call and Normalized are JSON
// text; History is the rendered steps kept within the budget.
type promptData struct {
	Categories  []Category
	EpisodeID   string
	TaskID      string
	Instruction string
	Protected   []string
	Created     []string
	Call        string
	Normalized  string
	Flags       []Flag
	Steps       []Step // the steps kept, oldest first
	History     string // Steps rendered, at most HistoryBudget characters
	Omitted     int    // older steps left out
	Audit       bool
}

// maxCallText bounds the call and its normalization in the prompt: a
// write_file of a megabyte must not blow the model's context, and its
// start and end say enough about what it does.
const maxCallText = 16000

// loadPrompts parses the embedded templates, each overridden by the file
// of the same name in dir when dir is set and holds it.
func loadPrompts(dir string) (prompts, error) {
	var p prompts
	for _, t := range []struct {
		name string
		dst  **template.Template
	}{{"system.tmpl", &p.system}, {"user.tmpl", &p.user}} {
		src, err := fs.ReadFile(embedded, "prompts/"+t.name)
		if err != nil {
			return p, fmt.Errorf("judge: read embedded %s: %w", t.name, err)
		}
		if dir != "" {
			b, err := os.ReadFile(filepath.Join(dir, t.name))
			switch {
			case err == nil:
				src = b
			case !errors.Is(err, fs.ErrNotExist):
				return p, fmt.Errorf("judge: read prompt override: %w", err)
			}
		}
		tmpl, err := template.New(t.name).Option("missingkey=error").Parse(string(src))
		if err != nil {
			return p, fmt.Errorf("judge: parse prompt %s: %w: fix the template", t.name, err)
		}
		*t.dst = tmpl
	}
	return p, nil
}

// render executes both templates for req.
func (p prompts) render(req Request, budget int) (system, user string, err error) {
	d := promptData{
		Categories:  Categories,
		EpisodeID:   req.EpisodeID,
		TaskID:      req.TaskID,
		Instruction: req.Instruction,
		Protected:   req.Protected,
		Created:     req.Created,
		Call:        elide(jsonText(req.Call), maxCallText),
		Normalized:  elide(jsonText(req.Normalized), maxCallText),
		Flags:       req.Flags,
		Audit:       req.Audit,
	}
	d.Steps, d.History, d.Omitted = trimHistory(req.History, budget)
	var sb strings.Builder
	sb.Grow(4096)
	if err := p.system.Execute(&sb, d); err != nil {
		return "", "", fmt.Errorf("judge: render system prompt: %w", err)
	}
	system = sb.String()
	sb.Reset()
	sb.Grow(4096 + len(d.History))
	if err := p.user.Execute(&sb, d); err != nil {
		return "", "", fmt.Errorf("judge: render user prompt: %w", err)
	}
	return system, sb.String(), nil
}

func jsonText(b []byte) string {
	if len(b) == 0 {
		return "(none)"
	}
	return string(b)
}

// trimHistory renders the newest steps that fit in budget characters.
// One step's output is cut in the middle to at most half the budget, so a
// single huge output cannot push every other step out; the newest step is
// always kept, cut further if it alone exceeds the budget.
func trimHistory(steps []Step, budget int) (kept []Step, text string, omitted int) {
	if budget <= 0 || len(steps) == 0 {
		return nil, "", len(steps)
	}
	parts := make([]string, 0, len(steps))
	total := 0
	i := len(steps) - 1
	for ; i >= 0; i-- {
		s := renderStep(steps[i], budget/2)
		if total+len(s) > budget {
			if len(parts) == 0 {
				parts = append(parts, elide(s, budget))
				total = budget
				i--
			}
			break
		}
		parts = append(parts, s)
		total += len(s)
	}
	first := i + 1
	var sb strings.Builder
	sb.Grow(total)
	for j := len(parts) - 1; j >= 0; j-- {
		sb.WriteString(parts[j])
	}
	return steps[first:], sb.String(), first
}

func renderStep(s Step, outMax int) string {
	var sb strings.Builder
	sb.WriteString("$ ")
	sb.WriteString(s.Call)
	sb.WriteByte('\n')
	if s.Output != "" {
		sb.WriteString(elide(s.Output, outMax))
		if !strings.HasSuffix(s.Output, "\n") {
			sb.WriteByte('\n')
		}
	}
	if len(s.Flags) > 0 {
		sb.WriteString("[flagged: ")
		sb.WriteString(strings.Join(s.Flags, ", "))
		sb.WriteString("]\n")
	}
	return sb.String()
}

const elision = "\n[...]\n"

// elide cuts s to at most n bytes by dropping its middle, which keeps the
// command's start and the output's end, where errors and results are.
func elide(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= len(elision) {
		return s[:n]
	}
	keep := n - len(elision)
	head, tail := keep/2, len(s)-(keep-keep/2)
	// Cut on rune boundaries: the prompt must stay valid UTF-8.
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + elision + s[tail:]
}
