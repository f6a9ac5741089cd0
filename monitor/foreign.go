package monitor

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/rollcage/rollcage/internal/jsondec"
	"github.com/rollcage/rollcage/toolcall"
)

// IsForeign reports whether FromForeign maps name onto one of rollcage's
// own tools (not a generic call): an alias of a tool in the registry or a
// name of the str_replace_editor family.
func IsForeign(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	return byAlias[n] != nil || slices.Contains(editorAliases, n)
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
func FromForeign(name, rawArgs string) toolcall.Call { return PrepareForeign(name, rawArgs).Call }

// PrepareForeign is FromForeign with the typed arguments it built for one
// of rollcage's tools, so they need no decoding again (NormalizePrepared,
// EpisodeState.Handle).
func PrepareForeign(name, rawArgs string) Prepared {
	lname := strings.ToLower(strings.TrimSpace(name))
	f := foreignArgs{raw: rawArgs}
	if testDecodeHook != nil {
		testDecodeHook(name)
	}
	f.ok = jsondec.Unmarshal([]byte(rawArgs), &f.args) == nil
	if s := byAlias[lname]; s != nil {
		return typedCall(s.Name, s.foreign(f))
	}
	if slices.Contains(editorAliases, lname) {
		return PrepareEditor(strings.ToLower(f.str("command")), f.str("path"), f.str("file_text"), f.str("old_str"), f.str("new_str"))
	}
	if !f.ok && rawArgs != "" {
		b, _ := json.Marshal(map[string]string{"input": rawArgs})
		return Prepared{Call: toolcall.Call{Tool: lname, Args: b}}
	}
	return Prepared{Call: toolcall.Call{Tool: lname, Args: json.RawMessage(rawArgs)}}
}

// EditorCall maps the str_replace_editor family (Anthropic's and
// SWE-agent's) by its sub-command.
func EditorCall(cmd, path, fileText, oldStr, newStr string) toolcall.Call {
	return PrepareEditor(cmd, path, fileText, oldStr, newStr).Call
}

// PrepareEditor is EditorCall with the typed arguments it built.
func PrepareEditor(cmd, path, fileText, oldStr, newStr string) Prepared {
	switch cmd {
	case "view":
		if looksLikeDir(path) {
			return typedCall(toolcall.ListDir, &toolcall.ListDirArgs{Path: path})
		}
		return typedCall(toolcall.ReadFile, &toolcall.ReadFileArgs{Path: path})
	case "create":
		return typedCall(toolcall.WriteFile, &toolcall.WriteFileArgs{Path: path, Content: fileText})
	case "str_replace":
		return typedCall(toolcall.Edit, &toolcall.EditArgs{Path: path, Old: oldStr, New: newStr})
	case "insert":
		// An insertion writes new text and replaces nothing: edit-like.
		return typedCall(toolcall.Edit, &toolcall.EditArgs{Path: path, New: newStr})
	case "undo_edit":
		return typedCall(toolcall.WriteFile, &toolcall.WriteFileArgs{Path: path})
	}
	return typedCall(toolcall.ReadFile, &toolcall.ReadFileArgs{Path: path})
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

// typedCall is a call of one of rollcage's tools with the arguments built
// for it (a pointer to its argument type), encoded for the record.
func typedCall(tool string, args any) Prepared {
	b, _ := json.Marshal(args)
	return Prepared{Call: toolcall.Call{Tool: tool, Args: b}, args: decoded{spec: byName[tool], args: args}}
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
