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
// with is in decision and toolcall, and so is the tool list
// (toolcall.Tools), so a call from the gateway can reach the monitor only
// through the harness (TestCallPath follows one). forbidden (below) gives
// the reasons; docs/architecture.md shows both (TestArchitectureTable).
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
	"toolcall":                              {"internal/jsondec"},
	"normalize":                             {"toolcall"},
	"decision":                              {"toolcall", "rules", "judge", "sandbox"},
	"rules":                                 {"toolcall", "rules/gate"},
	"rules/gate":                            {"toolcall"},
	"rules/corpus":                          {"normalize", "rules", "toolcall"},
	"judge":                                 {},
	"egress":                                {"rules"},
	"monitor":                               {"normalize", "rules", "judge", "sandbox", "egress", "toolcall", "decision", "internal/jsondec"},
	"trajectory":                            {"internal/jsondec"},
	"trajectory/trajectorytest":             {},
	"internal/jsondec":                      {},
	"internal/golden":                       {},
	"internal/realcorpus":                   {},
	"internal/memnet":                       {},
	"harness":                               {"monitor", "egress", "sandbox", "task", "trajectory", "rules", "judge", "toolcall", "decision"},
	"harness/harnesstest":                   {"demo", "monitor", "rules", "task", "trajectory", "sandbox", "sandbox/sandboxtest", "sandbox/docker/dockertest"},
	"audit":                                 {"normalize", "monitor", "rules", "judge", "trajectory", "task", "toolcall", "decision", "internal/jsondec"},
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
				t.Errorf("%s imports %s, which %s may not import: %s (allowed: %v)", path, ours, pkg, forbiddenWhy(pkg, ours), ok)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// forbidden gives the reason the design rules an import out, as
// tailscale's deptest does: TestLayering names it when such an import
// appears. "*" stands for every package of ours the importer's allowed
// list leaves out. An import out of allowed that is not listed here
// breaks the general rule that dependencies point inward.
var forbidden = map[string]map[string]string{
	"sandbox":        {"*": "the contract every backend implements and every consumer uses depends on none of ours"},
	"toolcall":       {"*": "the call every layer carries is plain data; it decodes its arguments with internal/jsondec alone"},
	"normalize":      {"*": "the normalizer is a pure function of the call, golden-tested alone: the monitor, the audit and the corpus tooling share it"},
	"judge":          {"*": "the judge takes plain structs, so the monitor and the offline audit share it"},
	"clients/python": {"*": "the Python client speaks the HTTP API only"},
	"trajectory":     {"*": "trajectories are plain data: export and its readers work without the runtime that wrote them"},
	"server": {
		"monitor": "the gateway reaches the monitor only through the harness, so a call enters each stage once (TestCallPath)",
		"rules":   "the gateway decides nothing itself: the harness's monitor asks the rules",
		"judge":   "the gateway decides nothing itself: the harness's monitor asks the judge",
	},
	"e2b": {
		"monitor": "the E2B API reaches the monitor only through the harness, so a call enters each stage once (TestCallPath)",
		"rules":   "the E2B API decides nothing itself: the harness's monitor asks the rules",
		"judge":   "the E2B API decides nothing itself: the harness's monitor asks the judge",
	},
	"rules/gate": {
		"rules": "the engine asks the gates which rules a call can trigger; the gates never evaluate a rule",
	},
	"rules": {
		"monitor":   "the rules are a stage the monitor calls; they never call back",
		"normalize": "the rules read a call already normalized, as data; their callers normalize it",
		"sandbox":   "the rules see the sandbox's facts as data, never a live sandbox",
	},
	"monitor": {
		"harness":    "the monitor is a stage the harness calls once per step; it never calls back",
		"trajectory": "the harness records what the monitor decided; the monitor records nothing",
	},
	"task": {
		"monitor": "grading decides the reward from the hidden tests, never from what the monitor thought",
		"harness": "grading is a function of a sandbox and a task; episodes call it, not the reverse",
	},
	"audit": {"harness": "the audit replays episodes offline through normalization, rules and judge without running them"},
	"rules/corpus": {
		"monitor": "the corpus tooling replays calls through normalize and the rules offline, without the monitor",
		"harness": "the corpus tooling evaluates the rules on recorded calls; it runs no episode",
	},
	"harness": {
		"server": "dependencies point inward: the gateway drives the harness",
		"e2b":    "dependencies point inward: the E2B API drives the harness",
	},
	"sandbox/docker": {
		"sandbox/containerd": "backends share code through sandbox/internal/hostside, not through each other",
		"sandbox/kube":       "backends share code through sandbox/internal/hostside, not through each other",
	},
	"sandbox/containerd": {
		"sandbox/docker": "backends share code through sandbox/internal/hostside, not through each other",
		"sandbox/kube":   "backends share code through sandbox/internal/hostside, not through each other",
	},
	"sandbox/kube": {
		"sandbox/docker":     "backends share code through sandbox/internal/hostside, not through each other",
		"sandbox/containerd": "backends share code through sandbox/internal/hostside, not through each other",
	},
}

// forbiddenWhy is the reason pkg may not import ours.
func forbiddenWhy(pkg, ours string) string {
	if why, ok := forbidden[pkg][ours]; ok {
		return why
	}
	if why, ok := forbidden[pkg]["*"]; ok {
		return why
	}
	return "dependencies point inward (docs/architecture.md)"
}

// TestForbiddenAgreesWithAllowed keeps the reasons true to the table: each
// names a package of the table, and an import its allowed list leaves out.
func TestForbiddenAgreesWithAllowed(t *testing.T) {
	for pkg, imports := range forbidden {
		ok, known := allowed[pkg]
		if !known {
			t.Errorf("forbidden[%q]: no such package in allowed", pkg)
			continue
		}
		for imp := range imports {
			if imp == "*" {
				continue
			}
			if _, known := allowed[imp]; !known {
				t.Errorf("forbidden[%q][%q]: no such package in allowed", pkg, imp)
			}
			for _, a := range ok {
				if a == imp {
					t.Errorf("forbidden[%q][%q]: allowed lists it; drop the reason or the permission", pkg, imp)
				}
			}
		}
	}
}
