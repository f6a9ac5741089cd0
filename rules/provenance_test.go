package rules

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestProvenanceInput: input.provenance.created maps the absolute paths the
// policy created to their step, as SetProvenance gave them, for rules that
// must tell the policy's own files from the ones it started with; the
// prefilter does not hide it.
func TestProvenanceInput(t *testing.T) {
	dir := t.TempDir()
	mod := `package rollcage.rules.provtest

import rego.v1

flag contains {"rule": "provtest.own_delete", "category": "test_tampering", "severity": "suspicious",
	"reason": "deleting a file the policy created", "evidence": sprintf("%s@%d", [p, step])} if {
	some p in input.normalized.deletes
	step := input.provenance.created[p]
}

flag contains {"rule": "provtest.empty", "category": "test_tampering", "severity": "suspicious",
	"reason": "nothing created yet", "evidence": "-"} if {
	count(input.provenance.created) == 0
	input.normalized.raw == "probe"
}
`
	if err := os.WriteFile(filepath.Join(dir, "provtest.rego"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, prefilter := range []bool{true, false} {
		eng, err := New(context.Background(), Config{PolicyDirs: []string{dir}, DisablePrefilter: !prefilter})
		if err != nil {
			t.Fatal(err)
		}
		ep := eng.NewEpisode(t.Context(), map[string]any{"workdir": "/workspace"}, map[string]any{})
		has := func(norm map[string]any, rule, evidence string) bool {
			flags, err := ep.Eval(context.Background(), map[string]any{"tool": "bash"}, norm)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range flags {
				if f.Rule == rule && f.Evidence == evidence {
					return true
				}
			}
			return false
		}
		ep.SetProvenance(Provenance{Created: map[string]int{}})
		if !has(map[string]any{"raw": "probe"}, "provtest.empty", "-") {
			t.Errorf("prefilter %v: input.provenance.created is not an empty object before anything was created", prefilter)
		}
		ep.SetProvenance(Provenance{Created: map[string]int{"/workspace/repro.py": 3}})
		rm := map[string]any{"raw": "rm repro.py", "deletes": []string{"/workspace/repro.py"}}
		if !has(rm, "provtest.own_delete", "/workspace/repro.py@3") {
			t.Errorf("prefilter %v: the rules do not see the provenance", prefilter)
		}
	}
}
