package rollcage

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/internal/golden"
)

const architectureDoc = "docs/architecture.md"

// TestArchitectureTable keeps the generated tables of
// docs/architecture.md the ones layering_test.go gives: the package table
// (a row per package of allowed, with the first sentence of its doc
// comment and the packages of ours it may import) and the forbidden
// imports with their reasons. -update rewrites them.
func TestArchitectureTable(t *testing.T) {
	packages, err := packageTable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	for _, block := range []struct{ name, want string }{
		{"package table", packages},
		{"forbidden imports", forbiddenTable()},
	} {
		begin, end := "<!-- BEGIN "+block.name+" -->\n", "<!-- END "+block.name+" -->\n"
		i, j := strings.Index(text, begin), strings.Index(text, end)
		if i < 0 || j < i {
			t.Fatalf("%s: no %q … %q block to hold the %s", architectureDoc, strings.TrimSpace(begin), strings.TrimSpace(end), block.name)
		}
		if got := text[i+len(begin) : j]; got != block.want {
			if !golden.Update() {
				t.Errorf("%s: the %s differs from layering_test.go and the packages' doc comments (-doc +layering); run go test -run TestArchitectureTable -update .\n%s",
					architectureDoc, block.name, cmp.Diff(got, block.want))
				continue
			}
			text = text[:i+len(begin)] + block.want + text[j:]
		}
	}
	if golden.Update() && text != string(src) {
		if err := os.WriteFile(architectureDoc, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// forbiddenTable renders forbidden as a Markdown table.
func forbiddenTable() string {
	var b strings.Builder
	b.WriteString("| package | may not import | why |\n|---|---|---|\n")
	for _, p := range slices.Sorted(maps.Keys(forbidden)) {
		for _, imp := range slices.Sorted(maps.Keys(forbidden[p])) {
			what := "`" + imp + "`"
			if imp == "*" {
				what = "any other of ours"
			}
			b.WriteString("| `" + p + "` | " + what + " | " + forbidden[p][imp] + " |\n")
		}
	}
	return b.String()
}

// packageTable renders allowed as a Markdown table, cmd/rollcage last.
func packageTable() (string, error) {
	var b strings.Builder
	b.WriteString("| package | what it is | may import (of ours) |\n|---|---|---|\n")
	for _, p := range append(slices.Sorted(maps.Keys(allowed)), "cmd/rollcage") {
		synopsis, err := packageSynopsis(p)
		if err != nil {
			return "", err
		}
		imports := "everything (wiring only)"
		if p != "cmd/rollcage" {
			imports = "none"
			if deps := allowed[p]; len(deps) > 0 {
				imports = "`" + strings.Join(deps, "`, `") + "`"
			}
		}
		b.WriteString("| `" + p + "` | " + strings.ReplaceAll(synopsis, "|", `\|`) + " | " + imports + " |\n")
	}
	return b.String(), nil
}

// packageSynopsis is the first sentence of the doc comment of the package
// in dir; generated code without one says so, any other package without
// one is an error.
func packageSynopsis(dir string) (string, error) {
	generated := false
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return "", err
		}
		if file.Doc != nil {
			return new(doc.Package).Synopsis(file.Doc.Text()), nil
		}
		generated = generated || ast.IsGenerated(file)
	}
	if generated {
		return "Generated code; see the package above it.", nil
	}
	return "", fmt.Errorf("package %s has no doc comment: write one (a doc.go saying what it is for)", dir)
}
