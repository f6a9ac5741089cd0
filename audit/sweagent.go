package audit

import (
	"fmt"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// sweStep is one step of a SWE-agent trajectory.
type sweStep struct {
	Action      string `json:"action"`
	Observation string `json:"observation"`
	// State is the environment after the action; SWE-agent records the
	// shell's directory in it (working_dir), 0.x as a JSON string.
	State json.RawMessage `json:"state"`
	// Query is the whole prompt of the step, most of a .traj's bytes.
	Query skip `json:"query"`
}

// workingDir is the shell's directory SWE-agent recorded after the step.
func (s sweStep) workingDir() string {
	var st struct {
		WorkingDir string `json:"working_dir"`
	}
	raw := s.State
	var str string
	if json.Unmarshal(raw, &str) == nil {
		raw = json.RawMessage(str)
	}
	if json.Unmarshal(raw, &st) != nil || !strings.HasPrefix(st.WorkingDir, "/") {
		return ""
	}
	return st.WorkingDir
}

type sweInfo struct {
	ExitStatus string `json:"exit_status"`
	Submission string `json:"submission"`
	Resolved   *bool  `json:"resolved"`
	InstanceID string `json:"instance_id"`
}

// parseSWEAgent reads a .traj: {"trajectory": [{action, observation}],
// "info": {exit_status, submission}}. The episode id is the file's name,
// which SWE-agent makes the instance id. steps are the trajectory when
// already decoded (nil: decode obj's).
func parseSWEAgent(base, name string, obj map[string]json.RawMessage, steps []sweStep) (Trace, error) {
	if steps == nil {
		if err := json.Unmarshal(obj["trajectory"], &steps); err != nil {
			return Trace{}, fmt.Errorf("\"trajectory\" is not a list of {action, observation} steps: %v", err)
		}
	}
	var info sweInfo
	if has(obj, "info") {
		_ = json.Unmarshal(obj["info"], &info)
	}
	ep := Trace{ID: base, Source: name, Format: FormatSWEAgent, TaskID: firstNonEmpty(info.InstanceID, base),
		Patch: info.Submission, Resolved: info.Resolved}
	var hist []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(obj["history"], &hist)
	var users []string
	for _, h := range hist {
		if h.Role == "user" && len(users) < 3 {
			users = append(users, trajectory.ContentText(h.Content))
		}
	}
	setInstruction(&ep, users...)
	m := sweMapper{}
	for i, s := range steps {
		a := strings.TrimSpace(s.Action)
		if a == "" {
			continue
		}
		st := Step{Output: s.Observation, Index: i, Cwd: s.workingDir()}
		st.set(m.action(a, s.Observation))
		if c := st.Call; !(c.Tool == toolcall.Bash && bashText(c) == a) {
			st.Original = clip(a, 2000)
		}
		ep.Steps = append(ep.Steps, st)
	}
	if len(ep.Steps) == 0 {
		return Trace{}, fmt.Errorf("SWE-agent trajectory with no actions; nothing to audit")
	}
	return ep, nil
}

func bashText(c toolcall.Call) string {
	var a toolcall.BashArgs
	_ = json.Unmarshal(c.Args, &a)
	return a.Command
}

// sweMapper tracks the file SWE-agent's windowed editor has open, which
// its edit, goto and search_file commands act on.
type sweMapper struct {
	open string
}

// action maps one SWE-agent action. Its own commands become file tools
// or the shell commands they stand for; anything else is a shell command.
func (m *sweMapper) action(a, obs string) toolcall.Prepared {
	first, rest, _ := strings.Cut(a, "\n")
	fields := shellWords(first)
	if len(fields) == 0 {
		return bash(a)
	}
	argN := func(i int) string {
		if i < len(fields) {
			return unquote(fields[i])
		}
		return ""
	}
	switch fields[0] {
	case "open":
		if p := argN(1); p != "" {
			m.open = p
			return call(toolcall.ReadFile, toolcall.ReadFileArgs{Path: p})
		}
	case "create":
		if p := argN(1); p != "" {
			m.open = p
			return call(toolcall.WriteFile, toolcall.WriteFileArgs{Path: p})
		}
	case "goto", "scroll_up", "scroll_down":
		// Moves the window over the open file: what it shows was already
		// read by open.
		return toolcall.Prepared{Call: toolcall.Call{Tool: "swe_" + fields[0], Args: []byte(`{}`)}}
	case "edit":
		text := strings.TrimSuffix(strings.TrimRight(rest, "\n"), "end_of_edit")
		return call(toolcall.Edit, toolcall.EditArgs{Path: m.open, New: strings.TrimRight(text, "\n")})
	case "find_file":
		dir := firstNonEmpty(argN(2), ".")
		return bash("find " + shq(dir) + " -name " + shq(argN(1)))
	case "search_dir":
		dir := firstNonEmpty(argN(2), ".")
		return bash("grep -rn -- " + shq(argN(1)) + " " + shq(dir))
	case "search_file":
		f := firstNonEmpty(argN(2), m.open)
		return bash("grep -n -- " + shq(argN(1)) + " " + shq(f))
	case "submit":
		return call(toolcall.Submit, toolcall.SubmitArgs{})
	case "str_replace_editor":
		return m.editor(a)
	}
	return bash(a)
}

// editor maps SWE-agent 1.x's str_replace_editor action line:
// str_replace_editor CMD PATH [--old_str X] [--new_str Y] [--file_text Z].
func (m *sweMapper) editor(a string) toolcall.Prepared {
	words := shellWords(a)
	if len(words) < 3 {
		return bash(a)
	}
	cmd, p := words[1], words[2]
	opts := map[string]string{}
	for i := 3; i+1 < len(words); i++ {
		if strings.HasPrefix(words[i], "--") {
			opts[strings.TrimPrefix(words[i], "--")] = words[i+1]
			i++
		}
	}
	m.open = p
	return editorCall(cmd, p, opts["file_text"], opts["old_str"], opts["new_str"])
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

func shq(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"$`\\|&;<>()*?[]{}!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellWords splits a command line with single and double quotes (the
// quoting SWE-agent uses for its tools' arguments); no expansions.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				cur.WriteString(s[i+1:])
				i = len(s)
			} else {
				cur.WriteString(s[i+1 : i+1+j])
				i += j + 1
			}
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}
