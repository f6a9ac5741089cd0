package normalize

import (
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Parsers are reused: building one per call would dominate the cost of a
// short command. A nested parse (bash -c inside a walk) takes its own.
var parserPool = sync.Pool{New: func() any {
	return syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(false))
}}

// input is what a command reads on stdin when the text is known from the
// script itself: a heredoc, a here-string, or the output of echo/printf/
// base64 -d earlier in a pipeline. via says where it came from, for the
// commands a shell finds in it.
type input struct {
	text string
	ok   bool
	via  string
}

// walker walks one parsed script. cwd follows cd through the script so
// `cd /opt && cat x` reads /opt/x; subshells and substitutions restore it.
type walker struct {
	a     *acc
	src   string
	cwd   string
	depth int
}

// shell parses src as bash and records what it does. A parse failure marks
// the call Unparsed and falls back to a token scan of the text.
func (a *acc) shell(src, cwd, via string, depth int) {
	if depth > maxDepth {
		a.fail("normalize: scripts nested deeper than 8 levels")
		return
	}
	p := parserPool.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(src), "")
	if err != nil {
		parserPool.Put(p)
		msg := err.Error()
		if via != "" {
			msg = via + ": " + msg
		}
		a.fail(msg)
		a.scanFallback(src, cwd, depth)
		return
	}
	w := &walker{a: a, src: src, cwd: cwd, depth: depth}
	w.stmtList(f.Stmts, via, input{})
	parserPool.Put(p)
}

// nested normalizes script text found inside the script being walked.
func (w *walker) nested(src, via string) {
	w.a.shell(src, w.cwd, via, w.depth+1)
}

func (w *walker) stmtList(list []*syntax.Stmt, via string, in input) input {
	var out input
	for _, s := range list {
		o := w.safeStmt(s, via, in)
		if o.ok {
			out.text += o.text
			out.ok = true
		}
	}
	return out
}

// safeStmt is stmt with a net: a panic on one odd construct is recorded
// as an internal error and the statement's text is scanned instead, so
// the statements after it are still walked and the rules still see the
// paths, hosts and git words of this one.
func (w *walker) safeStmt(s *syntax.Stmt, via string, in input) (out input) {
	if !recoverPanics {
		return w.stmt(s, via, in)
	}
	defer func() {
		if r := recover(); r != nil {
			w.a.internalError(r)
			w.a.scanFallback(w.text(s), w.cwd, w.depth)
			out = input{}
		}
	}()
	return w.stmt(s, via, in)
}

// stmt records one statement and returns what it writes to stdout when
// that is known (so `echo ... | base64 -d | sh` can be followed).
func (w *walker) stmt(s *syntax.Stmt, via string, in input) input {
	if s == nil {
		return input{}
	}
	toFile := false
	for _, r := range s.Redirs {
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			in = input{text: w.word(r.Hdoc), ok: true, via: "heredoc"}
		case syntax.WordHdoc:
			in = input{text: w.word(r.Word) + "\n", ok: true, via: "heredoc"}
		case syntax.RdrIn:
			t := w.word(r.Word)
			if !w.devTCP(t) {
				w.a.add(&w.a.n.Reads, w.path(t))
			}
			in = input{}
		case syntax.DplIn:
			w.word(r.Word)
		case syntax.DplOut:
			// >&2 and 2>&1 duplicate descriptors; `>& file` writes a file.
			t := w.word(r.Word)
			if !isFD(t) && w.writeTarget(t) && (r.N == nil || r.N.Value == "1") {
				toFile = true
			}
		case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob,
			syntax.RdrAll, syntax.AppAll, syntax.RdrAllClob, syntax.AppAllClob, syntax.RdrInOut:
			t := w.word(r.Word)
			if w.writeTarget(t) && (r.N == nil || r.N.Value == "1") {
				toFile = true
			}
		default:
			w.word(r.Word)
		}
	}
	var out input
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		for _, as := range c.Assigns {
			w.assign(as, true)
		}
		if len(c.Args) == 0 {
			return input{}
		}
		argv := make([]string, len(c.Args))
		for i, arg := range c.Args {
			argv[i] = w.word(arg)
		}
		out = w.call(argv, via, in)
	case *syntax.BinaryCmd:
		if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
			cur := in
			for _, st := range pipeStages(c, nil) {
				cur = w.stmt(st, "pipe", cur)
			}
			out = cur
			break
		}
		x := w.stmt(c.X, via, in)
		y := w.stmt(c.Y, via, in)
		out = input{text: x.text + y.text, ok: x.ok || y.ok}
	case *syntax.Subshell:
		saved := w.cwd
		out = w.stmtList(c.Stmts, "subshell", in)
		w.cwd = saved
	case *syntax.Block:
		out = w.stmtList(c.Stmts, via, in)
	case *syntax.IfClause:
		for ic := c; ic != nil; ic = ic.Else {
			w.stmtList(ic.Cond, via, input{})
			o := w.stmtList(ic.Then, via, in)
			if o.ok {
				out.text += o.text
				out.ok = true
			}
		}
	case *syntax.WhileClause:
		w.stmtList(c.Cond, via, input{})
		out = w.stmtList(c.Do, via, in)
	case *syntax.ForClause:
		switch l := c.Loop.(type) {
		case *syntax.WordIter:
			for _, it := range l.Items {
				w.word(it)
			}
		default:
			w.walkSubst(l)
		}
		out = w.stmtList(c.Do, via, in)
	case *syntax.CaseClause:
		w.word(c.Word)
		for _, it := range c.Items {
			for _, p := range it.Patterns {
				w.word(p)
			}
			w.stmtList(it.Stmts, via, in)
		}
	case *syntax.FuncDecl:
		w.stmt(c.Body, via, input{})
	case *syntax.TimeClause:
		out = w.stmt(c.Stmt, via, in)
	case *syntax.CoprocClause:
		w.stmt(c.Stmt, via, in)
	case *syntax.DeclClause:
		export := c.Variant != nil && c.Variant.Value == "export"
		for _, as := range c.Args {
			if as.Naked && as.Name == nil && as.Value != nil {
				// declare -x: the flag is a naked word.
				if f := w.word(as.Value); len(f) > 1 && f[0] == '-' && strings.ContainsRune(f, 'x') {
					export = true
				}
			}
		}
		for _, as := range c.Args {
			w.assign(as, export)
		}
	case *syntax.TestDecl:
		w.stmt(c.Body, via, input{})
	case nil:
	default:
		// [[ ]], (( )), let: nothing to record but substitutions inside.
		w.walkSubst(c)
	}
	if toFile {
		if out.ok {
			w.a.content(out.text)
		}
		return input{}
	}
	return out
}

func (w *walker) assign(as *syntax.Assign, env bool) {
	if as == nil {
		return
	}
	if as.Array != nil {
		for _, e := range as.Array.Elems {
			w.word(e.Value)
		}
	}
	if as.Name == nil {
		w.word(as.Value)
		return
	}
	v := w.word(as.Value)
	if env {
		w.a.env(as.Name.Value, v)
	}
}

// pipeStages flattens a | b | c into its stages in order.
func pipeStages(c *syntax.BinaryCmd, dst []*syntax.Stmt) []*syntax.Stmt {
	for _, s := range []*syntax.Stmt{c.X, c.Y} {
		if b, ok := s.Cmd.(*syntax.BinaryCmd); ok && len(s.Redirs) == 0 && !s.Negated &&
			(b.Op == syntax.Pipe || b.Op == syntax.PipeAll) {
			dst = pipeStages(b, dst)
			continue
		}
		dst = append(dst, s)
	}
	return dst
}

// writeTarget records a redirection target that is a real file and
// reports whether it was one.
func (w *walker) writeTarget(t string) bool {
	switch {
	case t == "" || w.devTCP(t):
		return false
	case t == "/dev/null" || t == "/dev/tty" || strings.HasPrefix(t, "/dev/std") || strings.HasPrefix(t, "/dev/fd/"):
		return false
	}
	w.a.add(&w.a.n.Writes, w.path(t))
	return true
}

// devTCP records /dev/tcp/host/port and /dev/udp/host/port as a host.
func (w *walker) devTCP(t string) bool {
	rest, ok := strings.CutPrefix(t, "/dev/tcp/")
	if !ok {
		rest, ok = strings.CutPrefix(t, "/dev/udp/")
	}
	if !ok {
		return false
	}
	host, _, _ := strings.Cut(rest, "/")
	w.a.host(host)
	return true
}

func isFD(s string) bool {
	if s == "-" {
		return true
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// path resolves p against the walker's cwd; pipes (/dev/fd/N, /dev/stdin)
// are not files and resolve to "", which the lists ignore.
func (w *walker) path(p string) string {
	if strings.HasPrefix(p, "/dev/fd/") || p == "/dev/stdin" || p == "/dev/stdout" || p == "/dev/stderr" {
		return ""
	}
	return resolvePath(p, w.cwd)
}

// subst walks a command or process substitution.
func (w *walker) subst(stmts []*syntax.Stmt) {
	saved := w.cwd
	w.stmtList(stmts, "subst", input{})
	w.cwd = saved
}

// substValue walks a command substitution and returns its value when the
// script itself says what it prints, on one line ($(printf '%s/%s' a b),
// $(echo ... | base64 -d)): a name built at run time meets the rules as
// the name it builds.
func (w *walker) substValue(stmts []*syntax.Stmt) (string, bool) {
	saved := w.cwd
	out := w.stmtList(stmts, "subst", input{})
	w.cwd = saved
	v := strings.TrimRight(out.text, "\n")
	if !out.ok || v == "" || len(v) > 4096 || strings.ContainsAny(v, "\n\x00") {
		return "", false
	}
	return v, true
}

// walkSubst finds substitutions in nodes the walker does not otherwise
// interpret ([[ ]], (( )), ${x:-$(cmd)}).
func (w *walker) walkSubst(n syntax.Node) {
	syntax.Walk(n, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CmdSubst:
			w.subst(x.Stmts)
			return false
		case *syntax.ProcSubst:
			w.subst(x.Stmts)
			return false
		}
		return true
	})
}

// word renders a word as the command would see it where that is known:
// quotes removed, escapes applied. Expansions are kept as written
// ($HOME, $(cmd)), and the commands inside substitutions are recorded.
func (w *walker) word(wd *syntax.Word) string {
	if wd == nil || len(wd.Parts) == 0 {
		return ""
	}
	if len(wd.Parts) == 1 {
		switch p := wd.Parts[0].(type) {
		case *syntax.Lit:
			if strings.IndexByte(p.Value, '\\') < 0 {
				return p.Value
			}
		case *syntax.SglQuoted:
			if !p.Dollar {
				return p.Value
			}
		}
	}
	var sb strings.Builder
	for _, p := range wd.Parts {
		w.part(&sb, p, false)
	}
	return sb.String()
}

func (w *walker) part(sb *strings.Builder, p syntax.WordPart, quoted bool) {
	switch p := p.(type) {
	case *syntax.Lit:
		unescape(sb, p.Value, quoted)
	case *syntax.SglQuoted:
		if p.Dollar {
			ansiC(sb, p.Value)
		} else {
			sb.WriteString(p.Value)
		}
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			w.part(sb, q, true)
		}
	case *syntax.ParamExp:
		sb.WriteString(w.text(p))
		if !p.Short {
			w.walkSubst(p)
		}
	case *syntax.CmdSubst:
		if v, ok := w.substValue(p.Stmts); ok {
			sb.WriteString(v)
		} else {
			sb.WriteString(w.text(p))
		}
	case *syntax.ProcSubst:
		// What the command sees: a pipe's path, not a file of its own.
		sb.WriteString("/dev/fd/63")
		w.subst(p.Stmts)
	case *syntax.ArithmExp:
		sb.WriteString(w.text(p))
		w.walkSubst(p)
	default:
		sb.WriteString(w.text(p))
	}
}

// text is the source text of a node.
func (w *walker) text(n syntax.Node) string {
	s, e := n.Pos(), n.End()
	if !s.IsValid() || !e.IsValid() {
		return ""
	}
	i, j := int(s.Offset()), int(e.Offset())
	if i < 0 || j > len(w.src) || i > j {
		return ""
	}
	return w.src[i:j]
}

// unescape removes the backslashes the shell removes: all of them outside
// quotes, those before $ ` " \ and newline inside double quotes.
func unescape(sb *strings.Builder, s string, quoted bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			sb.WriteByte(c)
			continue
		}
		n := s[i+1]
		switch {
		case n == '\n':
			i++
		case !quoted || n == '$' || n == '`' || n == '"' || n == '\\':
			sb.WriteByte(n)
			i++
		default:
			sb.WriteByte(c)
		}
	}
}

// ansiC applies the escapes of $'...'.
func ansiC(sb *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 'n':
			sb.WriteByte('\n')
		case 't':
			sb.WriteByte('\t')
		case 'r':
			sb.WriteByte('\r')
		case 'a':
			sb.WriteByte('\a')
		case 'e', 'E':
			sb.WriteByte(0x1b)
		case 'x':
			v, k := 0, 0
			for k < 2 && i+1 < len(s) && hexVal(s[i+1]) >= 0 {
				v = v*16 + hexVal(s[i+1])
				i++
				k++
			}
			if k == 0 {
				sb.WriteString(`\x`)
			} else {
				sb.WriteByte(byte(v))
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, k := int(s[i]-'0'), 1
			for k < 3 && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '7' {
				v = v*8 + int(s[i+1]-'0')
				i++
				k++
			}
			sb.WriteByte(byte(v))
		default:
			sb.WriteByte(s[i])
		}
	}
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
