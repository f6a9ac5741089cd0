package normalize

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// LeadingOutput is what bash prints running src up to its first
// statement whose output the text alone does not tell: the echo, printf
// (with %s, %b and %% directives, one argument each), true and :
// statements that open the script at its top level, joined by newlines,
// ; or &&, with literal words only (no expansion, glob or redirection).
// A blocked call's dummy output starts with it, as a shell would have
// printed it before it reached the blocked part. "" when src does not
// parse or opens with anything else.
func LeadingOutput(src string) string {
	p := parserPool.Get().(*syntax.Parser)
	defer parserPool.Put(p)
	f, err := p.Parse(strings.NewReader(src), "")
	if err != nil {
		return ""
	}
	var sb strings.Builder
	for _, s := range f.Stmts {
		out, ok := leading(s)
		sb.WriteString(out)
		if !ok {
			break
		}
	}
	return sb.String()
}

// leading is what s prints as far as it is known, and whether all of s
// is known (so the next statement runs after it, as far as the text
// tells).
func leading(s *syntax.Stmt) (string, bool) {
	if s == nil || s.Negated || s.Background || s.Coprocess || len(s.Redirs) > 0 {
		return "", false
	}
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		if len(c.Assigns) > 0 || len(c.Args) == 0 {
			return "", false
		}
		argv := make([]string, len(c.Args))
		for i, w := range c.Args {
			v, ok := literal(w)
			if !ok {
				return "", false
			}
			argv[i] = v
		}
		return builtinOutput(argv)
	case *syntax.BinaryCmd:
		if c.Op != syntax.AndStmt {
			return "", false
		}
		x, ok := leading(c.X)
		if !ok {
			return x, false
		}
		y, ok := leading(c.Y)
		return x + y, ok
	}
	return "", false
}

// builtinOutput is what echo, printf, true and : print with these
// arguments; false when it is not one of them or its output is not
// known.
func builtinOutput(argv []string) (string, bool) {
	switch argv[0] {
	case "true", ":":
		return "", true
	case "echo":
		out := echo(argv[1:])
		if strings.Contains(strings.Join(argv[1:], " "), `\c`) {
			return "", false // -e's \c stops the output
		}
		return out.text, true
	case "printf":
		args := argv[1:]
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			return "", false
		}
		f := strings.ReplaceAll(args[0], "%%", "")
		n := strings.Count(f, "%s") + strings.Count(f, "%b")
		if strings.Count(f, "%") != n || n != len(args)-1 || strings.Contains(args[0], `\c`) {
			return "", false
		}
		return printf(args).text, true
	}
	return "", false
}

// literal is a word's value when it has no expansion, glob, brace or
// tilde: plain text and quotes only.
func literal(w *syntax.Word) (string, bool) {
	var sb strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, "*?[]{}~") {
				return "", false
			}
			unescape(&sb, p.Value, false)
		case *syntax.SglQuoted:
			if p.Dollar {
				ansiC(&sb, p.Value)
			} else {
				sb.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				unescape(&sb, lit.Value, true)
			}
		default:
			return "", false
		}
	}
	return sb.String(), true
}
