package rollcage

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/rollcage/rollcage/"

// allowed lists, per package, the packages of ours it may import (non-test
// files). Dependencies point inward: sandbox imports none of ours.
// server imports monitor for what a call is answered with (Result,
// Decision, Timings, ArgsError, StreamOptions) and the tool list it offers
// (Tools, ForeignTools; see monitorCalls): Decision holds rules.Flag and
// judge.Verdict and Result a sandbox.ExecResult, so they cannot move to
// toolcall, which rules imports, without a cycle.
var allowed = map[string][]string{
	"sandbox":                               {},
	"sandbox/docker":                        {"sandbox", "agent", "sandbox/internal/hostside"},
	"sandbox/containerd":                    {"sandbox", "agent", "sandbox/internal/hostside"},
	"sandbox/internal/hostside":             {"sandbox", "agent"},
	"sandbox/sandboxtest":                   {"sandbox"},
	"sandbox/fake":                          {"sandbox"},
	"sandbox/kube":                          {"sandbox", "agent", "sandbox/internal/hostside"},
	"scripts/kube":                          {},
	"scripts/kube/pause":                    {},
	"sandbox/docker/dockertest":             {"sandbox", "sandbox/docker", "sandbox/sandboxtest"},
	"agent":                                 {"sandbox"},
	"cmd/rollcage-agent":                    {"agent", "sandbox"},
	"task":                                  {"sandbox"},
	"demo":                                  {"task", "sandbox"},
	"toolcall":                              {},
	"rules":                                 {"toolcall"},
	"rules/corpus":                          {"rules", "toolcall"},
	"judge":                                 {},
	"egress":                                {"rules"},
	"monitor":                               {"rules", "judge", "sandbox", "egress", "toolcall"},
	"trajectory":                            {},
	"harness":                               {"monitor", "egress", "sandbox", "task", "trajectory", "rules", "judge"},
	"harness/harnesstest":                   {"demo", "monitor", "rules", "task", "trajectory"},
	"audit":                                 {"monitor", "rules", "judge", "trajectory", "task"},
	"redteam":                               {"harness", "monitor", "sandbox", "task", "trajectory"},
	"server":                                {"harness", "trajectory", "monitor", "task", "sandbox", "rules", "judge"},
	"clients/python":                        {},
	"cmd/rollcage/servetest":                {"sandbox/sandboxtest"},
	"e2b/envd":                              {},
	"e2b/envd/process":                      {},
	"e2b/envd/filesystem":                   {},
	"e2b/envd/process/processconnect":       {"e2b/envd/process"},
	"e2b/envd/filesystem/filesystemconnect": {"e2b/envd/filesystem"},
	"e2b": {"server", "harness", "monitor", "task", "sandbox", "e2b/envd/process", "e2b/envd/process/processconnect",
		"e2b/envd/filesystem", "e2b/envd/filesystem/filesystemconnect"},
}

// TestLayering fails on an import that breaks the design's layering, the
// way tailscale's deptest does.
func TestLayering(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		if pkg == "." || pkg == "cmd/rollcage" {
			return nil // the root holds docs only; cmd/rollcage is wiring and may import everything
		}
		ok, known := allowed[pkg]
		if !known {
			t.Errorf("%s: package %s is not in the layering table; add it to layering_test.go and DESIGN's import table", path, pkg)
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			ours, found := strings.CutPrefix(p, module)
			if !found {
				continue
			}
			permitted := false
			for _, a := range ok {
				if ours == a {
					permitted = true
				}
			}
			if !permitted {
				t.Errorf("%s imports %s, which %s may not import (allowed: %v)", path, ours, pkg, ok)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// monitorCalls lists, per package above the harness, the monitor functions
// it may call. A tool call from the gateway goes server → harness →
// monitor → (rules, judge) → sandbox, entering each package once and in
// order: the gateway hands the call to the harness, which has the monitor
// check it (monitor.Check) and take it through; the gateway never calls
// into the monitor around the harness. It reads the monitor's tool list
// only when it offers tools (episode creation, MCP's tools/list, the
// metrics' label values); its types and constants it may use freely.
var monitorCalls = map[string][]string{
	"server": {"Tools", "ForeignTools"},
	"e2b":    {},
}

// TestCallsThroughHarness fails on a reference to any other monitor
// function (called or taken as a value) in those packages' non-test
// files.
func TestCallsThroughHarness(t *testing.T) {
	funcs := map[string]bool{}
	mfiles, err := filepath.Glob("monitor/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range mfiles {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.IsExported() {
				funcs[fd.Name.Name] = true
			}
		}
	}
	if !funcs["Check"] || !funcs["Tools"] || !funcs["FromForeign"] {
		t.Fatalf("monitor's functions not found (%d read): is the test run from the module root?", len(funcs))
	}
	for pkg, allowedCalls := range monitorCalls {
		files, err := filepath.Glob(pkg + "/*.go")
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Errorf("package %s has no Go files", pkg)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			for _, imp := range f.Imports {
				if strings.Trim(imp.Path.Value, `"`) == module+"monitor" {
					name = "monitor"
					if imp.Name != nil {
						name = imp.Name.Name
					}
				}
			}
			if name == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && funcs[sel.Sel.Name] && !slices.Contains(allowedCalls, sel.Sel.Name) {
					t.Errorf("%s: %s uses monitor.%s: a call reaches the monitor through the harness (harness.Episode.Call with harness.Checked), not around it", fset.Position(sel.Pos()), pkg, sel.Sel.Name)
				}
				return true
			})
		}
	}
}
