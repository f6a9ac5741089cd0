package toolcall

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/rollcage/rollcage/internal/jsondec"
)

// IsForeign reports whether FromForeign maps name onto one of rollcage's
// own tools (not a generic call): an alias of a tool in the registry or a
// name of the str_replace_editor family.
func IsForeign(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	_, ok := byAlias[n]
	return ok || slices.Contains(editorAliases, n)
}

// editorAliases are the str_replace_editor family (Anthropic's, OpenHands'
// and SWE-agent's), which FromForeign maps by sub-command (EditorCall).
var editorAliases = []string{"str_replace_editor", "str_replace_based_edit_tool", "text_editor", "edit_tool", "file_editor"}

// byAlias is the tool each alias of the registry names.
var byAlias = func() map[string]string {
	a := map[string]string{}
	for _, t := range registry {
		for _, x := range t.Aliases {
			a[x] = t.Name
		}
	}
	return a
}()

// fromForeign builds each tool's arguments from a foreign call's, by the
// keys other harnesses use.
var fromForeign = map[string]func(f foreignArgs) any{
	Bash: func(f foreignArgs) any {
		if !f.ok {
			return &BashArgs{Command: f.raw} // not JSON: the text is the command
		}
		return &BashArgs{Command: f.str("command", "cmd", "script", "input", "code")}
	},
	ReadFile: func(f foreignArgs) any { return &ReadFileArgs{Path: f.path()} },
	WriteFile: func(f foreignArgs) any {
		return &WriteFileArgs{Path: f.path(), Content: f.str("content", "file_text", "contents", "text")}
	},
	Edit: func(f foreignArgs) any {
		return &EditArgs{Path: f.path(), Old: f.str("old", "old_str", "old_string", "search"), New: f.str("new", "new_str", "new_string", "replace")}
	},
	ListDir: func(f foreignArgs) any { return &ListDirArgs{Path: f.str("path", "dir", "directory")} },
	Submit:  func(f foreignArgs) any { return &SubmitArgs{Message: f.str("message", "result", "summary")} },
}

// foreignArgs are a foreign call's arguments as the model wrote them.
type foreignArgs struct {
	raw  string
	args map[string]any
	ok   bool // raw is a JSON object
}

// str is the first of keys present as a string (or an argv list,
// rendered as a command).
func (f foreignArgs) str(keys ...string) string {
	for _, k := range keys {
		if v, ok := f.args[k]; ok {
			switch v := v.(type) {
			case string:
				return v
			case []any:
				return argvText(v)
			}
		}
	}
	return ""
}

// path is the file a file tool names, by the keys harnesses use.
func (f foreignArgs) path() string { return f.str("path", "file_path", "filename", "file") }

// FromForeign turns a foreign tool call (name and its JSON arguments as
// the model wrote them: OpenHands' execute_bash and str_replace_editor,
// SWE-agent's, Codex's shell, ...) into a call of rollcage's tool model.
// Unknown tools stay generic: the normalizer still picks paths and URLs
// out of them. The audit reads foreign trajectories with it and the
// gateway takes foreign tool names with it.
func FromForeign(name, rawArgs string) Call { return PrepareForeign(name, rawArgs).Call }

// PrepareForeign is FromForeign with the typed arguments it built for one
// of rollcage's tools, so they need no decoding again (the normalizer and
// the monitor read them).
func PrepareForeign(name, rawArgs string) Prepared {
	lname := strings.ToLower(strings.TrimSpace(name))
	f := foreignArgs{raw: rawArgs}
	if testDecodeHook != nil {
		testDecodeHook(name)
	}
	f.ok = jsondec.Unmarshal([]byte(rawArgs), &f.args) == nil
	if tool, ok := byAlias[lname]; ok {
		return typedCall(tool, fromForeign[tool](f))
	}
	if slices.Contains(editorAliases, lname) {
		return PrepareEditor(strings.ToLower(f.str("command")), f.str("path"), f.str("file_text"), f.str("old_str"), f.str("new_str"))
	}
	if !f.ok && rawArgs != "" {
		b, _ := json.Marshal(map[string]string{"input": rawArgs})
		return Prepared{Call: Call{Tool: lname, Args: b}, decoded: true}
	}
	return Prepared{Call: Call{Tool: lname, Args: json.RawMessage(rawArgs)}, decoded: true}
}

// EditorCall maps the str_replace_editor family (Anthropic's and
// SWE-agent's) by its sub-command.
func EditorCall(cmd, path, fileText, oldStr, newStr string) Call {
	return PrepareEditor(cmd, path, fileText, oldStr, newStr).Call
}

// PrepareEditor is EditorCall with the typed arguments it built.
func PrepareEditor(cmd, path, fileText, oldStr, newStr string) Prepared {
	switch cmd {
	case "view":
		if looksLikeDir(path) {
			return typedCall(ListDir, &ListDirArgs{Path: path})
		}
		return typedCall(ReadFile, &ReadFileArgs{Path: path})
	case "create":
		return typedCall(WriteFile, &WriteFileArgs{Path: path, Content: fileText})
	case "str_replace":
		return typedCall(Edit, &EditArgs{Path: path, Old: oldStr, New: newStr})
	case "insert":
		// An insertion writes new text and replaces nothing: edit-like.
		return typedCall(Edit, &EditArgs{Path: path, New: newStr})
	case "undo_edit":
		return typedCall(WriteFile, &WriteFileArgs{Path: path})
	}
	return typedCall(ReadFile, &ReadFileArgs{Path: path})
}

// looksLikeDir: a path whose last element has no extension (or ends in
// /) is taken for a directory, as editors list directories on view.
func looksLikeDir(p string) bool {
	if strings.HasSuffix(p, "/") || p == "" || p == "." {
		return true
	}
	last := p[strings.LastIndexByte(p, '/')+1:]
	return !strings.Contains(last, ".") && !strings.HasPrefix(strings.ToLower(last), "makefile") && !strings.EqualFold(last, "dockerfile")
}

// argvText renders an argv list as a command: ["bash","-lc","X"] is X.
func argvText(v []any) string {
	parts := make([]string, 0, len(v))
	for _, x := range v {
		s, _ := x.(string)
		parts = append(parts, s)
	}
	if len(parts) == 3 && (parts[0] == "bash" || parts[0] == "sh" || parts[0] == "zsh") && strings.HasPrefix(parts[1], "-") && strings.Contains(parts[1], "c") {
		return parts[2]
	}
	for i, p := range parts {
		if p == "" || strings.ContainsAny(p, " \t\n'\"$`\\|&;<>()*?[]{}") {
			parts[i] = "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
		}
	}
	return strings.Join(parts, " ")
}
