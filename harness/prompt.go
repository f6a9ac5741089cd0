package harness

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"text/template"

	"github.com/rollcage/rollcage/task"
)

//go:embed prompts/*.tmpl
var promptFS embed.FS

// Prompt files of the OpenAI policy. A PromptDir may override any of them.
const (
	PromptSystem  = "system.tmpl"  // the system message
	PromptTask    = "task.tmpl"    // the first user message of the episode
	PromptCompact = "compact.tmpl" // the request to summarize before compaction
	PromptResume  = "resume.tmpl"  // the first user message of a later segment
)

// PromptData is what the prompt templates see.
type PromptData struct {
	Task    task.Task
	Workdir string
	// Tools names the tools offered ("bash, read_file, ..."), from monitor's
	// registry.
	Tools string
	// Summary is the model's summary of the previous segments (resume.tmpl).
	Summary string
}

type prompts map[string]*template.Template

func loadPrompts(dir string) (prompts, error) {
	p := prompts{}
	for _, name := range []string{PromptSystem, PromptTask, PromptCompact, PromptResume} {
		src, err := promptFS.ReadFile("prompts/" + name)
		if err != nil {
			return nil, err
		}
		if dir != "" {
			b, err := os.ReadFile(filepath.Join(dir, name))
			switch {
			case err == nil:
				src = b
			case !os.IsNotExist(err):
				return nil, fmt.Errorf("harness: prompt %s: %w", name, err)
			}
		}
		t, err := template.New(name).Option("missingkey=error").Parse(string(src))
		if err != nil {
			return nil, fmt.Errorf("harness: prompt %s: %w: fix the template syntax", name, err)
		}
		p[name] = t
	}
	return p, nil
}

func (p prompts) render(name string, d PromptData) (string, error) {
	var b bytes.Buffer
	if err := p[name].Execute(&b, d); err != nil {
		return "", fmt.Errorf("harness: prompt %s: %w", name, err)
	}
	return b.String(), nil
}
