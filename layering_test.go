package rollcage

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/rollcage/rollcage/"

// allowed lists, per package, the packages of ours it may import (non-test
// files). Dependencies point inward: sandbox imports none of ours. The
// gateway (server, e2b) may not import monitor: what a call is answered
// with is in decision and toolcall, the tool list comes from the harness
// (harness.Tools), so a call from the gateway can reach the monitor only
// through the harness (TestCallPath follows one).
var allowed = map[string][]string{
	"sandbox":                               {},
	"sandbox/host":                          {"sandbox"},
	"sandbox/docker":                        {"sandbox", "agent", "sandbox/host", "sandbox/internal/hostside"},
	"sandbox/containerd":                    {"sandbox", "agent", "sandbox/host", "sandbox/internal/hostside"},
	"sandbox/internal/hostside":             {"sandbox", "agent", "sandbox/host"},
	"sandbox/sandboxtest":                   {"sandbox", "sandbox/host", "internal/golden"},
	"sandbox/fake":                          {"sandbox"},
	"sandbox/kube":                          {"sandbox", "agent", "sandbox/host", "sandbox/internal/hostside"},
	"scripts/kube":                          {},
	"scripts/kube/pause":                    {},
	"sandbox/docker/dockertest":             {"sandbox", "sandbox/docker", "sandbox/sandboxtest"},
	"agent":                                 {"sandbox"},
	"cmd/rollcage-agent":                    {"agent", "sandbox"},
	"task":                                  {"sandbox"},
	"demo":                                  {"task", "sandbox"},
	"toolcall":                              {},
	"decision":                              {"toolcall", "rules", "judge", "sandbox"},
	"rules":                                 {"toolcall", "internal/jsondec"},
	"rules/corpus":                          {"rules", "toolcall"},
	"judge":                                 {},
	"egress":                                {"rules"},
	"monitor":                               {"rules", "judge", "sandbox", "egress", "toolcall", "decision", "internal/jsondec"},
	"trajectory":                            {"internal/jsondec"},
	"internal/jsondec":                      {},
	"internal/golden":                       {},
	"internal/realcorpus":                   {},
	"harness":                               {"monitor", "egress", "sandbox", "task", "trajectory", "rules", "judge", "toolcall", "decision"},
	"harness/harnesstest":                   {"demo", "monitor", "rules", "task", "trajectory", "sandbox", "sandbox/sandboxtest", "sandbox/docker/dockertest"},
	"audit":                                 {"monitor", "rules", "judge", "trajectory", "task", "toolcall", "decision", "internal/jsondec"},
	"redteam":                               {"harness", "monitor", "sandbox", "task", "trajectory"},
	"server":                                {"harness", "trajectory", "task", "sandbox", "toolcall", "decision"},
	"clients/python":                        {},
	"cmd/rollcage/servetest":                {"sandbox/sandboxtest"},
	"e2b/envd":                              {},
	"e2b/envd/process":                      {},
	"e2b/envd/filesystem":                   {},
	"e2b/envd/process/processconnect":       {"e2b/envd/process"},
	"e2b/envd/filesystem/filesystemconnect": {"e2b/envd/filesystem"},
	"e2b": {"server", "harness", "task", "sandbox", "toolcall", "decision", "e2b/envd/process", "e2b/envd/process/processconnect",
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
