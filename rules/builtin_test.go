package rules

import (
	"bytes"
	"fmt"
	goast "go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoBuiltinReplaced: no Go file of the module registers or replaces
// an OPA builtin (topdown.RegisterBuiltinFunc, rego.RegisterBuiltin1…,
// ast.RegisterBuiltin): such a registry is process-wide, so every other
// OPA user in the process would get the replacement. A function of our
// own belongs on the query that uses it (rego.Function1…).
func TestNoBuiltinReplaced(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || n == "vendor" || n == "node_modules" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Contains(src, []byte("Register")) {
			return nil
		}
		for _, call := range opaRegistrations(t, path, src) {
			t.Errorf("%s replaces an OPA builtin for the whole process; register the function on the query (rego.Function1…)", call)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files under %s; the module has hundreds", files, root)
	}
	// the check finds what it looks for
	bad := []byte("package x\nimport (\n\t\"github.com/open-policy-agent/opa/v1/topdown\"\n\topa \"github.com/open-policy-agent/opa/v1/rego\"\n)\n" +
		"func init() { topdown.RegisterBuiltinFunc(\"regex.match\", nil); opa.RegisterBuiltin2(nil, nil) }\n")
	if got := opaRegistrations(t, "bad.go", bad); len(got) != 2 {
		t.Errorf("opaRegistrations found %q in a file with two registrations", got)
	}
}

// opaRegistrations lists the calls in a Go file of a function named
// Register… from a package of OPA's module, as file:line name.
func opaRegistrations(t *testing.T, path string, src []byte) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	opa := map[string]bool{} // local names of OPA's packages
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if !strings.HasPrefix(p, "github.com/open-policy-agent/opa/") {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		opa[name] = true
	}
	var out []string
	goast.Inspect(f, func(n goast.Node) bool {
		call, ok := n.(*goast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*goast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*goast.Ident); ok && opa[x.Name] && strings.HasPrefix(sel.Sel.Name, "Register") {
			out = append(out, fmt.Sprintf("%s %s.%s", fset.Position(call.Pos()), x.Name, sel.Sel.Name))
		}
		return true
	})
	return out
}
