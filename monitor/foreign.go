package monitor

import (
	"encoding/json"
	"strings"
)

// Foreign tool vocabularies, by lowercase name.
var (
	bashTools   = nameSet("bash", "execute_bash", "shell", "run_command", "run_shell_command", "terminal", "execute_command", "exec_command", "run_bash", "local_shell", "container.exec", "cmd")
	editorTools = nameSet("str_replace_editor", "str_replace_based_edit_tool", "text_editor", "edit_tool", "file_editor")
	readTools   = nameSet("read_file", "view_file", "open_file", "read", "cat_file")
	writeTools  = nameSet("write_file", "create_file", "write", "write_to_file")
	editTools   = nameSet("edit", "edit_file", "replace_in_file", "str_replace", "apply_edit")
	listTools   = nameSet("list_dir", "list_directory", "list_files", "ls")
	submitTools = nameSet("submit", "finish", "task_done", "attempt_completion", "done")
)

// IsForeign reports whether FromForeign maps name onto one of rollcage's
// own tools (not a generic call).
func IsForeign(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	return bashTools[n] || editorTools[n] || readTools[n] || writeTools[n] || editTools[n] || listTools[n] || submitTools[n]
}

func nameSet(s ...string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, x := range s {
		m[x] = true
	}
	return m
}

// FromForeign turns a foreign tool call (name and its JSON arguments as
// the model wrote them: OpenHands' execute_bash and str_replace_editor,
// SWE-agent's, Codex's shell, ...) into a call of rollcage's tool model.
// Unknown tools stay generic: the normalizer still picks paths and URLs
// out of them. The audit reads foreign trajectories with it and the
// gateway takes foreign tool names with it.
func FromForeign(name, rawArgs string) ToolCall {
	lname := strings.ToLower(strings.TrimSpace(name))
	var args map[string]any
	argsOK := json.Unmarshal([]byte(rawArgs), &args) == nil
	str := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := args[k]; ok {
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
	switch {
	case bashTools[lname]:
		cmd := rawArgs
		if argsOK {
			cmd = str("command", "cmd", "script", "input", "code")
		}
		return foreignBash(cmd)
	case editorTools[lname]:
		return EditorCall(strings.ToLower(str("command")), str("path"), str("file_text"), str("old_str"), str("new_str"))
	case readTools[lname]:
		return call(ToolReadFile, ReadFileArgs{Path: str("path", "file_path", "filename", "file")})
	case writeTools[lname]:
		return call(ToolWriteFile, WriteFileArgs{Path: str("path", "file_path", "filename", "file"),
			Content: str("content", "file_text", "contents", "text")})
	case editTools[lname]:
		return call(ToolEdit, EditArgs{Path: str("path", "file_path", "filename", "file"),
			Old: str("old", "old_str", "old_string", "search"), New: str("new", "new_str", "new_string", "replace")})
	case listTools[lname]:
		return call(ToolListDir, ListDirArgs{Path: str("path", "dir", "directory")})
	case submitTools[lname]:
		return call(ToolSubmit, SubmitArgs{Message: str("message", "result", "summary")})
	}
	if !argsOK && rawArgs != "" {
		b, _ := json.Marshal(map[string]string{"input": rawArgs})
		return ToolCall{Tool: lname, Args: b}
	}
	return ToolCall{Tool: lname, Args: json.RawMessage(rawArgs)}
}

// EditorCall maps the str_replace_editor family (Anthropic's and
// SWE-agent's) by its sub-command.
func EditorCall(cmd, path, fileText, oldStr, newStr string) ToolCall {
	switch cmd {
	case "view":
		if looksLikeDir(path) {
			return call(ToolListDir, ListDirArgs{Path: path})
		}
		return call(ToolReadFile, ReadFileArgs{Path: path})
	case "create":
		return call(ToolWriteFile, WriteFileArgs{Path: path, Content: fileText})
	case "str_replace":
		return call(ToolEdit, EditArgs{Path: path, Old: oldStr, New: newStr})
	case "insert":
		// An insertion writes new text and replaces nothing: edit-like.
		return call(ToolEdit, EditArgs{Path: path, New: newStr})
	case "undo_edit":
		return call(ToolWriteFile, WriteFileArgs{Path: path})
	}
	return call(ToolReadFile, ReadFileArgs{Path: path})
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

func foreignBash(cmd string) ToolCall {
	return call(ToolBash, BashArgs{Command: cmd})
}

func call(tool string, args any) ToolCall {
	b, _ := json.Marshal(args)
	return ToolCall{Tool: tool, Args: b}
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
