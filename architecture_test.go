package rollcage

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/internal/golden"
)

const (
	architectureDoc = "docs/architecture.md"
	tableBegin      = "<!-- BEGIN package table -->\n"
	tableEnd        = "<!-- END package table -->\n"
)

// TestArchitectureTable keeps the package table of docs/architecture.md
// the one layering_test.go gives: a row per package of allowed, with the
// first sentence of its doc comment and the packages of ours it may
// import. -update rewrites the table.
func TestArchitectureTable(t *testing.T) {
	want, err := packageTable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	i := strings.Index(text, tableBegin)
	j := strings.Index(text, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: no %q … %q block to hold the package table", architectureDoc, strings.TrimSpace(tableBegin), strings.TrimSpace(tableEnd))
	}
	got := text[i+len(tableBegin) : j]
	if got == want {
		return
	}
	if golden.Update() {
		text = text[:i+len(tableBegin)] + want + text[j:]
		if err := os.WriteFile(architectureDoc, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the package table differs from layering_test.go and the packages' doc comments (-doc +layering); run go test -run TestArchitectureTable -update .\n%s",
		architectureDoc, cmp.Diff(got, want))
}

// packageTable renders allowed as a Markdown table, cmd/rollcage last.
func packageTable() (string, error) {
	var b strings.Builder
	b.WriteString("| package | what it is | may import (of ours) |\n|---|---|---|\n")
	pkgs := make([]string, 0, len(allowed))
	for p := range allowed {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range append(pkgs, "cmd/rollcage") {
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
