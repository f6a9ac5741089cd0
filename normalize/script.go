package normalize

import (
	"regexp"
	"strings"
)

// Inline programs (python -c, perl -e, heredocs fed to interpreters) are
// not parsed: cheap patterns catch the common ways a script reads files,
// fetches URLs or shells out, which is what the rules ask about.
var (
	reOpen     = regexp.MustCompile(`\bopen\(\s*[rbfu]?['"]([^'"\n]+)['"]\s*(?:,\s*(?:mode\s*=\s*)?[rbfu]?['"]([a-zA-Z+]+)['"])?`)
	rePathOp   = regexp.MustCompile(`Path\(\s*[rbfu]?['"]([^'"\n]+)['"]\s*\)\s*\.\s*(\w+)`)
	reFSRead   = regexp.MustCompile(`\b(?:File\.read|File\.open|File\.readlines|IO\.read|IO\.readlines|readFileSync|readFile|createReadStream|file_get_contents|fopen|np\.load|pd\.read_csv|json\.load)\(\s*[rbfu]?['"]([^'"\n]+)['"]`)
	reFSWrite  = regexp.MustCompile(`\b(?:File\.write|writeFileSync|writeFile|appendFileSync|appendFile|createWriteStream|file_put_contents|os\.makedirs|os\.mkdir|os\.chmod|os\.truncate)\(\s*[rbfu]?['"]([^'"\n]+)['"]`)
	reFSDelete = regexp.MustCompile(`\b(?:os\.remove|os\.unlink|os\.rmdir|os\.removedirs|shutil\.rmtree|unlinkSync|rmSync|rmdirSync|File\.delete|FileUtils\.rm_rf|FileUtils\.rm)\(\s*[rbfu]?['"]([^'"\n]+)['"]`)
	reFSList   = regexp.MustCompile(`\b(?:os\.listdir|os\.scandir|os\.walk|glob\.glob|glob\.iglob|readdirSync|readdir|Dir\.glob|Dir\.entries)\(\s*[rbfu]?['"]([^'"\n]+)['"]`)
	reCopy     = regexp.MustCompile(`\bshutil\.(copy|copy2|copyfile|copytree|move)\(\s*[rbfu]?['"]([^'"\n]+)['"]\s*,\s*[rbfu]?['"]([^'"\n]+)['"]`)
	reURL      = regexp.MustCompile(`(?i)\b(?:https?|ftp|wss?)://[^\s'"<>\\)\]}` + "`" + `]+`)
	reHTTPConn = regexp.MustCompile(`HTTPS?Connection\(\s*['"]([^'"\n/]+)['"]`)
	reSocket   = regexp.MustCompile(`(?:connect(?:_ex)?|create_connection)\(\s*\(\s*['"]([^'"\n]+)['"]\s*,\s*\d+`)
	reSubList  = regexp.MustCompile(`\b(?:\w+\.(?:run|call|check_call|check_output|getoutput|Popen)|os\.exec\w*|os\.spawn\w*)\(\s*\[([^\]]*)\]`)
	reQuoted   = regexp.MustCompile(`'([^'\n]*)'|"([^"\n]*)"`)
	reSystem   = regexp.MustCompile(`\b(?:os\.system|os\.popen|subprocess\.\w+|system|execSync|exec|spawnSync|getoutput|getstatusoutput|shell_exec|passthru)\(\s*[rf]?(?:'([^'\n]*)'|"([^"\n]*)")`)
	reBacktick = regexp.MustCompile("(?:%x\\{|`)([^`}\\n]+)[`}]")
	reAbsPath  = regexp.MustCompile(`(?:^|[\s'"=(:,])(/[A-Za-z0-9_.~+@%-][^\s'"<>|;&()*?,]*)`)
)

// script records an inline program and what it visibly does.
func (w *walker) script(src string) { w.program(src, true, nil) }

// program records what a program visibly does: the files it reads, writes
// and lists and the commands it runs; an inline one (inline) also its
// text and the URLs and hosts in it. A program file the policy wrote
// earlier and runs now (runFile) had its text checked when it was
// written; running it adds only what it does to the files and commands.
// memo, for such a file, remembers its matches from one run to the next
// (nil: none).
func (w *walker) program(src string, inline bool, memo *fileMatches) {
	if src == "" {
		return
	}
	a := w.a
	if inline {
		a.add(&a.n.Scripts, src)
	}
	// Each pattern runs only when its anchor text occurs: most scripts
	// touch one or two of these APIs and the regexps are the cost.
	for _, m := range memo.findAll(reOpen, src, "open(") {
		p := w.path(m[1])
		mode := m[2]
		if strings.ContainsAny(mode, "wax+") {
			a.add(&a.n.Writes, p)
			if strings.Contains(mode, "+") && !strings.ContainsAny(mode, "wx") {
				a.add(&a.n.Reads, p)
			}
		} else {
			a.add(&a.n.Reads, p)
		}
	}
	for _, m := range memo.findAll(rePathOp, src, "Path(") {
		p := w.path(m[1])
		switch m[2] {
		case "read_text", "read_bytes", "open":
			a.add(&a.n.Reads, p)
		case "write_text", "write_bytes", "touch", "mkdir", "chmod":
			a.add(&a.n.Writes, p)
		case "unlink", "rmdir":
			a.add(&a.n.Deletes, p)
		case "iterdir", "glob", "rglob", "walk":
			a.add(&a.n.Lists, p)
		}
	}
	for _, re := range []struct {
		re      *regexp.Regexp
		list    *[]string
		anchors []string
	}{
		{reFSRead, &a.n.Reads, []string{"File.", "IO.", "read", "Read", "fopen", "file_get", ".load"}},
		{reFSWrite, &a.n.Writes, []string{"File.", "rite", "ppend", "file_put", "os."}},
		{reFSDelete, &a.n.Deletes, []string{"os.", "shutil.", "Sync", "File.", "FileUtils."}},
		{reFSList, &a.n.Lists, []string{"os.", "glob", "readdir", "Dir."}},
	} {
		for _, m := range memo.findAll(re.re, src, re.anchors...) {
			a.add(re.list, w.path(m[1]))
		}
	}
	for _, m := range memo.findAll(reCopy, src, "shutil.") {
		if m[1] == "move" {
			a.add(&a.n.Deletes, w.path(m[2]))
		} else {
			a.add(&a.n.Reads, w.path(m[2]))
		}
		a.add(&a.n.Writes, w.path(m[3]))
	}
	if inline {
		for _, u := range urls(src) {
			a.url(strings.TrimRight(u, ".,;"))
		}
		for _, m := range memo.findAll(reHTTPConn, src, "Connection(") {
			a.host(m[1])
		}
		for _, m := range memo.findAll(reSocket, src, "connect") {
			a.host(m[1])
		}
	}
	// subprocess under any name (import subprocess as sp)
	for _, m := range memo.findAll(reSubList, src, "run(", "call(", "check_", "Popen(", "os.exec", "os.spawn") {
		var argv []string
		for _, q := range reQuoted.FindAllStringSubmatch(m[1], -1) {
			argv = append(argv, q[1]+q[2])
		}
		if len(argv) > 0 {
			w.scriptCall(argv)
		}
	}
	for _, m := range memo.findAll(reSystem, src, "system", "popen", "subprocess", "exec", "spawn", "getoutput", "passthru") {
		if c := m[1] + m[2]; c != "" {
			w.nested(c, "script")
		}
	}
	for _, m := range memo.findAll(reBacktick, src, "`", "%x{") {
		w.nested(m[1], "script")
	}
}

// scriptCall records an argv a script runs without a shell
// (subprocess.run([...])), one nesting level down.
func (w *walker) scriptCall(argv []string) {
	if w.depth+1 > maxDepth {
		w.a.fail("normalize: scripts nested deeper than 8 levels")
		return
	}
	w.depth++
	w.call(argv, "script", input{})
	w.depth--
}

// scanText is the fallback for shell text that does not parse: a crude
// tokenizer splits it into commands at ; | & ( ) and newlines, honouring
// quotes as far as they go, and each command is interpreted as if parsed,
// so `cat /opt/grader/x ((` still reads /opt/grader/x.
func (a *acc) scanText(src, cwd string, depth int) {
	w := &walker{a: a, src: src, cwd: cwd, depth: depth}
	var argv []string
	var tok strings.Builder
	inTok := false
	redir := byte(0) // '<' or '>': the next token is a redirection target
	flushTok := func() {
		if !inTok {
			return
		}
		t := tok.String()
		tok.Reset()
		inTok = false
		switch redir {
		case '<':
			if !w.devTCP(t) {
				a.add(&a.n.Reads, w.path(t))
			}
		case '>':
			if !isFD(strings.TrimPrefix(t, "&")) {
				w.writeTarget(t)
			}
		case 'h': // heredoc delimiter
		default:
			argv = append(argv, t)
		}
		redir = 0
	}
	flushCmd := func() {
		flushTok()
		if len(argv) > 0 {
			w.call(argv, "", input{})
		}
		argv = nil
		redir = 0
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '\'', '"':
			inTok = true
			j := strings.IndexByte(src[i+1:], c)
			if j < 0 {
				tok.WriteString(src[i+1:])
				i = len(src)
			} else {
				tok.WriteString(src[i+1 : i+1+j])
				i += j + 1
			}
		case '\\':
			if i+1 < len(src) {
				i++
				tok.WriteByte(src[i])
				inTok = true
			}
		case ' ', '\t':
			flushTok()
		case '\n', ';', '|', '&', '(', ')', '`', '{', '}':
			if c == '&' && i+1 < len(src) && src[i+1] == '>' {
				flushTok()
				redir = '>'
				i++
				continue
			}
			flushCmd()
		case '$':
			if i+1 < len(src) && src[i+1] == '(' {
				flushCmd()
				i++
				continue
			}
			tok.WriteByte(c)
			inTok = true
		case '<', '>':
			if inTok && c == '>' && isFD(tok.String()) {
				tok.Reset()
				inTok = false
			}
			flushTok()
			redir = c
			if c == '<' && i+1 < len(src) && src[i+1] == '<' {
				redir = 'h'
				for i+1 < len(src) && (src[i+1] == '<' || src[i+1] == '-') {
					i++
				}
			}
			for i+1 < len(src) && (src[i+1] == '>' || src[i+1] == '|') {
				i++
			}
			if i+1 < len(src) && src[i+1] == '&' {
				i++ // >&2: a descriptor follows
				tok.WriteByte('&')
				inTok = true
			}
		default:
			tok.WriteByte(c)
			inTok = true
		}
	}
	flushCmd()
	for _, u := range reURL.FindAllString(src, -1) {
		a.url(strings.TrimRight(u, ".,;"))
	}
}

// scanLoose picks absolute paths and URLs out of text that is not even
// JSON (a generic tool's malformed args).
func (a *acc) scanLoose(src, cwd string) {
	for _, u := range reURL.FindAllString(src, -1) {
		a.url(strings.TrimRight(u, ".,;"))
	}
	for _, m := range reAbsPath.FindAllStringSubmatch(src, -1) {
		if !strings.HasPrefix(m[1], "//") {
			a.add(&a.n.Reads, resolvePath(m[1], cwd))
		}
	}
}

// findAll runs re only when one of the anchors occurs in src.
func findAll(re *regexp.Regexp, src string, anchors ...string) [][]string {
	for _, a := range anchors {
		if strings.Contains(src, a) {
			return re.FindAllStringSubmatch(src, -1)
		}
	}
	return nil
}

func urls(src string) []string {
	if !strings.Contains(src, "://") {
		return nil
	}
	return reURL.FindAllString(src, -1)
}
