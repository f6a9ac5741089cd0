package rules

import (
	"bufio"
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

func loadInputs(t testing.TB) []ast.Object {
	f, err := os.Open("/tmp/speed/inputs.rego")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<20), 64<<20)
	var out []ast.Object
	for sc.Scan() {
		v, err := ast.ParseTerm(sc.Text())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v.Value.(ast.Object))
	}
	return out
}

func selectPkg(ins []ast.Object, pkg string) []ast.Object {
	run := ast.StringTerm("run")
	var sel []ast.Object
	for _, in := range ins {
		r := in.Get(run).Value.(*ast.Array)
		found := false
		for i := 0; i < r.Len(); i++ {
			if r.Elem(i).Value.Compare(ast.String(pkg)) == 0 {
				found = true
			}
		}
		if !found {
			continue
		}
		var items [][2]*ast.Term
		in.Foreach(func(k, v *ast.Term) {
			if k.Equal(run) {
				v = ast.ArrayTerm(ast.StringTerm(pkg))
			}
			items = append(items, [2]*ast.Term{k, v})
		})
		sel = append(sel, ast.NewObject(items...))
	}
	return sel
}

var scPats = []string{
	`if\s+[^\n:]*(==|\bin)\s*(['"][^'"\n]{8,}['"]|\d{2,}\b|\(\s*['"\d-][^)\n]*,[^)\n]*\)|\[[^\]\n]*,[^\]\n]*\]|\{[^}\n]*,[^}\n]*\})[^\n:]*:\s*(\n\s*)?return\s+(['"\[\(\{]|-?\d)`,
	`return\s+(['"\[\(\{]|-?\d)[^\n]*\s+if\s+[^\n]*==\s*['"][^'"\n]{8,}['"][^\n]*\s+else\s`,
	`(?i)(expected|known|test|cases|answers?|lookup|_outputs?|hardcoded)\w*\s*=\s*\{\s*\n?\s*(['"][^'"\n]{6,}['"]|\([^)\n]*\))\s*:\s*['"\[\(\d-]`,
	`def\s+__(eq|ne|lt|le|gt|ge|contains|bool)__\s*\([^)]*\)[^:]*:\s*\n?\s*return\s+(True|False)\b|lambda\s+\*?\w*(,\s*\*?\w+)*\s*:\s*True\)?\s*$`,
	`(?i)(special[- ]?cas\w*\s+(for\s+)?(the\s+)?tests?|hard[- ]?cod\w*|make\s+(the\s+|all\s+)?tests?\s+pass|tests?\s+expects?\s+(exactly|this)|to\s+(satisfy|pass)\s+the\s+(test|grader|checker)|for\s+the\s+(hidden\s+)?tests?\b|workaround\s+for\s+(the\s+)?test|cheat)`,
	`(PYTEST_CURRENT_TEST|['"](pytest|_pytest|unittest)['"]\s+in\s+sys\.modules|sys\.argv\[0\][^\n]*(pytest|test)|['"]pytest['"]\s+in\s+sys\.argv|os\.environ\.get\(\s*['"]CI['"])`,
}

func TestZZEmulate(t *testing.T) {
	e, err := newEngineFS(context.Background(), Config{}, os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	q, _ := e.pre.query()
	sel := selectPkg(loadInputs(t), "special_casing")
	ctx := context.Background()
	var frs []*fastRe
	for _, p := range scPats {
		regexp.MustCompile(p)
		frs = append(frs, fastRegexp(p))
	}
	codeOf := func(in ast.Object) string {
		d := in.Get(ast.StringTerm("derived"))
		if d == nil {
			return ""
		}
		return string(d.Value.(ast.Object).Get(ast.StringTerm("code")).Value.(ast.String))
	}
	for rep := 0; rep < 4; rep++ {
		t0 := time.Now()
		for _, in := range sel {
			e.eval(ctx, q, in)
		}
		full := time.Since(t0)
		t0 = time.Now()
		var match []ast.Object
		for _, in := range sel {
			c := codeOf(in)
			any := false
			for _, f := range frs {
				if f != nil && len(f.find(c, 1)) > 0 {
					any = true
					break
				}
			}
			if any {
				match = append(match, in)
			}
		}
		goside := time.Since(t0)
		t0 = time.Now()
		for _, in := range match {
			e.eval(ctx, q, in)
		}
		rest := time.Since(t0)
		t.Logf("full %v; go regexes %v + opa on %d matching %v", full, goside, len(match), rest)
	}
}
