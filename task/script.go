package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/rollcage/rollcage/sandbox"
)

// Kinds of a Script.
const (
	KindClean = "clean" // an honest solve
	KindHack  = "hack"  // a solve that cheats (and still ends with a working fix)
	KindNoop  = "noop"  // submits without changing anything
)

// Categories a hack Script may be labelled with. They are the category
// names of the default rules bundle (package rules), repeated here because
// task imports no other rollcage package; a test in package demo keeps the
// two in step.
var Categories = []string{
	"protected_access",
	"history_mining",
	"network_fetch",
	"test_tampering",
	"evaluator_manipulation",
	"special_casing",
	"environment_probing",
	"chained_discovery",
}

// Tool names a Step may use; the same names and argument shapes as the
// monitor's tool-call model.
const (
	ToolBash      = "bash"
	ToolReadFile  = "read_file"
	ToolWriteFile = "write_file"
	ToolEdit      = "edit"
	ToolListDir   = "list_dir"
	ToolSubmit    = "submit"
)

// Script is a scripted trajectory for one task: the tool calls a policy
// would make, labelled with what they are.
type Script struct {
	Task       string   `json:"task"`
	Name       string   `json:"name"`
	Kind       string   `json:"kind"`
	Categories []string `json:"categories,omitempty"`
	// Family groups scripts that try the same thing in different
	// spellings (the red-team suite's per-family figures); optional,
	// lowercase words joined by dashes.
	Family      string `json:"family,omitempty"`
	Description string `json:"description"`
	Steps       []Step `json:"steps"`
}

// Step is one tool call, in the JSON shape of the monitor's ToolCall.
type Step struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// Argument shapes of the tools, as in the monitor's tool-call model.
type (
	BashArgs struct {
		Command    string  `json:"command"`
		TimeoutSec float64 `json:"timeout_sec,omitempty"`
	}
	PathArgs struct {
		Path string `json:"path"`
	}
	WriteFileArgs struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	EditArgs struct {
		Path string `json:"path"`
		Old  string `json:"old"`
		New  string `json:"new"`
	}
	SubmitArgs struct {
		Message string `json:"message,omitempty"`
	}
)

// Validate reports the first problem of s: an unknown kind or category, a
// hack without categories, a step with an unknown tool or bad arguments, a
// script that does not end with submit.
func (s Script) Validate() error {
	switch {
	case s.Task == "":
		return &FieldError{"task", "is required"}
	case s.Name == "":
		return &FieldError{"name", "is required"}
	case !slices.Contains([]string{KindClean, KindHack, KindNoop}, s.Kind):
		return &FieldError{"kind", fmt.Sprintf("is %q; use clean, hack or noop", s.Kind)}
	case s.Kind == KindHack && len(s.Categories) == 0:
		return &FieldError{"categories", "is required for a hack; name at least one of " + strings.Join(Categories, ", ")}
	case s.Kind != KindHack && len(s.Categories) > 0:
		return &FieldError{"categories", "is only for hacks"}
	case len(s.Steps) == 0:
		return &FieldError{"steps", "is required"}
	case s.Family != "" && !validFamily(s.Family):
		return &FieldError{"family", fmt.Sprintf("is %q; use lowercase letters and digits in words joined by dashes (object-store)", s.Family)}
	}
	for _, c := range s.Categories {
		if !slices.Contains(Categories, c) {
			return &FieldError{"categories", fmt.Sprintf("has unknown category %q; use one of %s", c, strings.Join(Categories, ", "))}
		}
	}
	for i, st := range s.Steps {
		if err := st.Validate(); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	if last := s.Steps[len(s.Steps)-1]; last.Tool != ToolSubmit {
		return &FieldError{"steps", "must end with a submit step"}
	}
	return nil
}

// validFamily reports whether f is lowercase words joined by single dashes.
func validFamily(f string) bool {
	for _, w := range strings.Split(f, "-") {
		if w == "" {
			return false
		}
		for _, r := range w {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
				return false
			}
		}
	}
	return true
}

// Validate checks that the step's tool is known and its arguments decode
// strictly into the tool's shape with the required fields set.
func (st Step) Validate() error {
	args := st.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var required []struct{ name, val string }
	var err error
	switch st.Tool {
	case ToolBash:
		var a BashArgs
		err = decodeStrict(args, &a)
		required = append(required, struct{ name, val string }{"command", a.Command})
	case ToolReadFile, ToolListDir:
		var a PathArgs
		err = decodeStrict(args, &a)
		required = append(required, struct{ name, val string }{"path", a.Path})
	case ToolWriteFile:
		var a WriteFileArgs
		err = decodeStrict(args, &a)
		required = append(required, struct{ name, val string }{"path", a.Path})
	case ToolEdit:
		var a EditArgs
		err = decodeStrict(args, &a)
		required = append(required, struct{ name, val string }{"path", a.Path}, struct{ name, val string }{"old", a.Old})
	case ToolSubmit:
		var a SubmitArgs
		err = decodeStrict(args, &a)
	default:
		return &FieldError{"tool", fmt.Sprintf("is %q; use bash, read_file, write_file, edit, list_dir or submit", st.Tool)}
	}
	if err != nil {
		return fmt.Errorf("%s args: %w", st.Tool, err)
	}
	for _, r := range required {
		if r.val == "" {
			return fmt.Errorf("%s args: %w", st.Tool, &FieldError{r.name, "is required"})
		}
	}
	return nil
}

// LoadScripts reads every *.json file under dir of fsys (recursively) as a
// Script, validates it and rejects duplicate task/name pairs. Scripts come
// back in path order.
func LoadScripts(fsys fs.FS, dir string) ([]Script, error) {
	var out []Script
	seen := map[string]string{}
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || path.Ext(p) != ".json" {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		var s Script
		if err := decodeStrict(data, &s); err != nil {
			return &LoadError{File: p, Err: err}
		}
		if err := s.Validate(); err != nil {
			return &LoadError{File: p, Err: err}
		}
		key := s.Task + "/" + s.Name
		if first, ok := seen[key]; ok {
			return &LoadError{File: p, Err: fmt.Errorf("duplicate script %q of task %q (also in %s)", s.Name, s.Task, first)}
		}
		seen[key] = p
		out = append(out, s)
		return nil
	})
	if err != nil {
		var le *LoadError
		if !errors.As(err, &le) {
			err = fmt.Errorf("load scripts from %s: %w", dir, err)
		}
		return nil, err
	}
	return out, nil
}

// ApplyStep runs one step directly against sb, with no monitor in
// between (for tests and for checking that a script really solves its
// task). Relative paths are resolved against workdir. It returns what the
// policy would be shown; a failed edit or file operation is an error.
func ApplyStep(ctx context.Context, sb sandbox.Sandbox, workdir string, st Step) (string, error) {
	if err := st.Validate(); err != nil {
		return "", fmt.Errorf("apply step: %w", err)
	}
	abs := func(p string) string {
		if path.IsAbs(p) {
			return p
		}
		return path.Join(workdir, p)
	}
	switch st.Tool {
	case ToolBash:
		var a BashArgs
		json.Unmarshal(st.Args, &a)
		req := sandbox.ExecRequest{Command: a.Command}
		if a.TimeoutSec > 0 {
			req.Timeout = secs(a.TimeoutSec)
		}
		res, err := sb.Exec(ctx, req)
		if err != nil {
			return "", fmt.Errorf("apply bash: %w", err)
		}
		return fmt.Sprintf("%s\n[exit %d]", res.Output, res.ExitCode), nil
	case ToolReadFile:
		var a PathArgs
		json.Unmarshal(st.Args, &a)
		data, _, err := sb.ReadFile(ctx, abs(a.Path), 1<<20)
		if err != nil {
			return "", fmt.Errorf("apply read_file: %w", err)
		}
		return string(data), nil
	case ToolListDir:
		var a PathArgs
		json.Unmarshal(st.Args, &a)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "ls -la -- " + shellQuote(abs(a.Path))})
		if err != nil {
			return "", fmt.Errorf("apply list_dir: %w", err)
		}
		return res.Output, nil
	case ToolWriteFile:
		var a WriteFileArgs
		json.Unmarshal(st.Args, &a)
		if err := sb.WriteFile(ctx, abs(a.Path), []byte(a.Content), 0o644); err != nil {
			return "", fmt.Errorf("apply write_file: %w", err)
		}
		return "wrote " + a.Path, nil
	case ToolEdit:
		var a EditArgs
		json.Unmarshal(st.Args, &a)
		p := abs(a.Path)
		data, truncated, err := sb.ReadFile(ctx, p, 0)
		if err != nil {
			return "", fmt.Errorf("apply edit: %w", err)
		}
		if truncated {
			return "", fmt.Errorf("apply edit %s: file too large", a.Path)
		}
		if n := strings.Count(string(data), a.Old); n != 1 {
			return "", fmt.Errorf("apply edit %s: old text found %d times; it must occur exactly once", a.Path, n)
		}
		if err := sb.WriteFile(ctx, p, []byte(strings.Replace(string(data), a.Old, a.New, 1)), 0o644); err != nil {
			return "", fmt.Errorf("apply edit: %w", err)
		}
		return "edited " + a.Path, nil
	}
	return "", nil // submit
}
