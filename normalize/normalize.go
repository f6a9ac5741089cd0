package normalize

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/rollcage/rollcage/toolcall"
)

// maxDepth bounds how deep scripts nested in scripts (bash -c "eval '...'",
// base64 piped into sh, os.system in python -c) are followed. Deeper nesting
// is itself a sign of obfuscation, so it marks the call Unparsed.
const maxDepth = 8

// recoverPanics turns a panic inside the normalizer into an Unparsed result,
// so a parser bug fails closed instead of taking the monitor down. The fuzz
// test switches it off to see the panics.
var recoverPanics = true

// Normalize makes a tool call legible to the rules: the commands it runs,
// the paths it reads, writes, deletes and lists, the hosts and URLs it
// contacts, the git operations it performs and the environment it sets.
// cwd is the session's current directory; relative paths are resolved
// against it and against cd earlier in the same script. files are the
// script files the policy wrote earlier in the episode (may be nil): a
// call that runs one is normalized with its text.
//
// Normalize is pure (no I/O) and never panics: text it cannot parse comes
// back Unparsed with ParseError set and a best-effort scan of the raw text.
func Normalize(call toolcall.Call, cwd string, files *Files) toolcall.Normalized {
	args := toolcall.NewArgs(call.Tool)
	var err error
	if args != nil {
		var read bool
		if read, err = toolcall.DecodeArgs(call.Args, args); !read {
			args = nil
		}
	}
	n, _ := Decoded(call, args, err, cwd, files)
	return n
}

// Decoded is Normalize on the call's arguments as the tool registry
// decoded them (toolcall.DecodeArgs): args is a pointer to the tool's
// argument type, or nil when they could not be read; err is what is
// wrong with them. A call whose arguments do not decode strictly will not
// run, but it is judged on what it asked for (args, read past an unknown
// field), or on its raw text when they could not be read.
//
// It also returns the internal errors (panics) it recovered from; the
// monitor flags a call that has any. Where the walk panicked, what the
// text scan finds is added (Scan), so an internal error never leaves the
// rules with less than the text shows.
func Decoded(call toolcall.Call, args any, err error, cwd string, files *Files) (n toolcall.Normalized, internal []string) {
	n.Tool = call.Tool
	n.Cwd = cwd
	a := &acc{n: &n, files: files}
	if recoverPanics {
		defer func() {
			if r := recover(); r != nil {
				a.internalError(r)
				a.scanFallback(n.Raw, cwd, 0)
			}
			internal = a.internal
		}()
	}
	switch {
	case !toolcall.IsTool(call.Tool): // a generic tool
		n.Raw = string(call.Args)
		if len(call.Args) == 0 {
			return n, a.internal
		}
		var v any
		if err := json.Unmarshal(call.Args, &v); err != nil {
			a.fail(fmt.Sprintf("%s args: %v", call.Tool, err))
			a.scanLoose(n.Raw, cwd)
			return n, a.internal
		}
		a.generic(v, cwd)
	case call.Tool == toolcall.Submit: // nothing to see but the text
		n.Raw = string(call.Args)
		if len(call.Args) > 0 && !json.Valid(call.Args) {
			a.fail(call.Tool + " args: invalid JSON")
		}
	case args == nil || len(call.Args) == 0:
		n.Raw = string(call.Args)
		if err == nil {
			err = toolcall.ErrNoArgs // runs as {}, but the rules see that nothing was given
		}
		msg := fmt.Sprintf("%s args: %v", call.Tool, err)
		if call.Tool == toolcall.Bash {
			msg += `; send {"command": "..."}`
		}
		a.fail(msg)
	default:
		a.args(args, cwd)
	}
	return n, a.internal
}

// Scan is what the text of a bash command shows with no parse at all:
// the fallback scan (a token scan of the text into commands, and a loose
// scan of its URLs and absolute paths) that Normalize adds wherever its
// parse gives up. The rules are owed at least its flags for an Unparsed
// call (the monitor's FuzzNormalizeFailsClosed holds them to it).
func Scan(cmd, cwd string, unparsed bool) toolcall.Normalized {
	n := toolcall.Normalized{Tool: toolcall.Bash, Raw: cmd, Cwd: cwd, Unparsed: unparsed}
	a := &acc{n: &n}
	a.scanFallback(cmd, cwd, 0)
	return n
}

// args fills a from the typed arguments of one of rollcage's own tools.
func (a *acc) args(args any, cwd string) {
	switch args := args.(type) {
	case *toolcall.BashArgs:
		a.n.Raw = args.Command
		a.shell(args.Command, cwd, "", 0)
	case *toolcall.ReadFileArgs:
		a.n.Raw = args.Path
		a.add(&a.n.Reads, resolvePath(args.Path, cwd))
	case *toolcall.WriteFileArgs:
		a.n.Raw = args.Path
		a.add(&a.n.Writes, resolvePath(args.Path, cwd))
		a.n.Content = args.Content
		if b, err := args.Bytes(); err == nil {
			a.n.Content = string(b) // the rules see what is written
		}
	case *toolcall.EditArgs:
		a.n.Raw = args.Path
		a.add(&a.n.Writes, resolvePath(args.Path, cwd))
		a.n.Content = args.New
		a.n.OldContent = args.Old
	case *toolcall.ListDirArgs:
		a.n.Raw = args.Path
		p := args.Path
		if p == "" {
			p = "."
		}
		a.add(&a.n.Lists, resolvePath(p, cwd))
	default:
		panic(fmt.Sprintf("%s: arguments of type %T", a.n.Tool, args))
	}
}

// acc accumulates findings into a Normalized, deduplicating as it goes.
type acc struct {
	n        *toolcall.Normalized
	internal []string        // panics recovered during the walk
	files    *Files          // script files the policy wrote, followed when run; may be nil
	ran      map[string]bool // script files already followed
}

// internalError records a recovered panic: the call is Unparsed and the
// monitor flags it certain.
func (a *acc) internalError(r any) {
	msg := fmt.Sprintf("normalize: internal error: %v", r)
	a.internal = append(a.internal, msg)
	a.n.Unparsed = true
	if a.n.ParseError == "" || !strings.HasPrefix(a.n.ParseError, "normalize: internal error") {
		a.n.ParseError = msg
	}
}

// scanFallback adds what a scan of src alone finds (the token scan of
// scanText, and the loose scan of URLs and absolute paths), itself
// guarded: a panic in it leaves the loose scan's findings.
func (a *acc) scanFallback(src, cwd string, depth int) {
	if src == "" {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			a.internal = append(a.internal, fmt.Sprintf("normalize: text scan: internal error: %v", r))
		}
	}()
	a.scanLoose(src, cwd)
	a.scanText(src, cwd, depth)
}

func (a *acc) fail(msg string) {
	a.n.Unparsed = true
	if a.n.ParseError == "" {
		a.n.ParseError = msg
	}
}

// add appends s to *list unless it is empty or already there. Lists are
// short (a handful of entries), so a linear scan beats a map.
func (a *acc) add(list *[]string, s string) {
	if s == "" {
		return
	}
	for _, x := range *list {
		if x == s {
			return
		}
	}
	*list = append(*list, s)
}

func (a *acc) env(k, v string) {
	if k == "" {
		return
	}
	if a.n.Env == nil {
		a.n.Env = make(map[string]string, 2)
	}
	a.n.Env[k] = v
}

func (a *acc) content(s string) {
	if s == "" {
		return
	}
	if a.n.Content != "" {
		a.n.Content += "\n"
	}
	a.n.Content += s
}

// url records a network target written as a URL (or a bare host/path the
// tool accepts as one). It reports whether a host was found.
func (a *acc) url(raw string) bool {
	h := hostOf(raw)
	if h == "" {
		return false
	}
	a.add(&a.n.URLs, raw)
	a.add(&a.n.Hosts, h)
	return true
}

func (a *acc) host(h string) {
	a.add(&a.n.Hosts, cleanHost(h))
}

// generic picks paths and URLs out of a generic tool's JSON arguments.
func (a *acc) generic(v any, cwd string) {
	switch v := v.(type) {
	case map[string]any:
		// In key order: the same call must normalize the same way.
		for _, k := range slices.Sorted(maps.Keys(v)) {
			a.generic(v[k], cwd)
		}
	case []any:
		for _, x := range v {
			a.generic(x, cwd)
		}
	case string:
		switch {
		case isURL(v):
			a.url(v)
		case looksLikePath(v):
			a.add(&a.n.Reads, resolvePath(v, cwd))
		}
	}
}

func looksLikePath(s string) bool {
	if len(s) < 2 || len(s) > 4096 || strings.ContainsAny(s, "\n\x00") {
		return false
	}
	return s[0] == '/' || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, "~/")
}

// resolvePath makes p absolute against cwd and cleans it. ~ and paths that
// start with an expansion ($HOME/x) are kept as written (cleaned): their
// value is not known here. With an unknown cwd a relative path stays
// relative.
func resolvePath(p, cwd string) string {
	if p == "" {
		return ""
	}
	if p[0] == '/' || p[0] == '~' || p[0] == '$' || cwd == "" {
		return path.Clean(p)
	}
	return path.Join(cwd, p)
}

// isURL reports whether s has a scheme a network tool would fetch.
func isURL(s string) bool {
	i := strings.Index(s, "://")
	if i <= 0 || i > 12 {
		return false
	}
	for _, c := range s[:i] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// hostOf returns the lowercase host of a URL, of a scp-style git remote
// (git@host:org/repo) or of a scheme-less host/path as curl accepts it.
func hostOf(raw string) string {
	if isURL(raw) {
		u, err := url.Parse(raw)
		if err != nil {
			// Unparseable (a stray % or space): cut by hand.
			rest := raw[strings.Index(raw, "://")+3:]
			if i := strings.IndexAny(rest, "/?#"); i >= 0 {
				rest = rest[:i]
			}
			return cleanHost(rest)
		}
		if u.Scheme == "file" {
			return ""
		}
		return cleanHost(u.Host)
	}
	if h, ok := scpHost(raw); ok {
		return h
	}
	if looksLikeHost(raw) {
		h := raw
		if i := strings.IndexAny(h, "/?#"); i >= 0 {
			h = h[:i]
		}
		return cleanHost(h)
	}
	return ""
}

// scpHost recognises user@host:path (git, scp, rsync).
func scpHost(s string) (string, bool) {
	at := strings.IndexByte(s, '@')
	if at <= 0 || strings.Contains(s, "://") {
		return "", false
	}
	rest := s[at+1:]
	c := strings.IndexByte(rest, ':')
	if c <= 0 || strings.ContainsAny(rest[:c], "/ ") {
		return "", false
	}
	return cleanHost(rest[:c]), true
}

// looksLikeHost accepts example.com, example.com:8080/x, 10.0.0.1/x: a
// dotted name whose last label is alphabetic, or an IPv4 address.
func looksLikeHost(s string) bool {
	h := s
	if i := strings.IndexAny(h, "/?#"); i >= 0 {
		h = h[:i]
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	if h == "localhost" {
		return true
	}
	dot := strings.LastIndexByte(h, '.')
	if dot <= 0 || dot == len(h)-1 {
		return false
	}
	digits := true
	for _, c := range h {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
			digits = false
		case c >= '0' && c <= '9', c == '.':
		default:
			return false
		}
	}
	if digits {
		return strings.Count(h, ".") == 3
	}
	tld := h[dot+1:]
	for _, c := range tld {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	// Files look like hosts (main.py, notes.txt); a URL host's last label
	// is rarely one of the common source extensions.
	switch strings.ToLower(tld) {
	case "py", "go", "js", "ts", "txt", "md", "sh", "json", "yaml", "yml", "toml", "cfg", "ini", "c", "h", "rs", "rb", "java", "log", "csv", "html", "xml", "lock", "tar", "gz", "zip", "whl", "patch", "diff", "pyc", "so", "o", "out", "bak", "tmp", "pem", "key", "conf", "env", "d":
		return false
	}
	return true
}

// cleanHost strips userinfo, port and brackets and lowercases.
func cleanHost(h string) string {
	if i := strings.LastIndexByte(h, '@'); i >= 0 {
		h = h[i+1:]
	}
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i > 0 {
			return strings.ToLower(h[1:i])
		}
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 && strings.Count(h, ":") == 1 {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}
