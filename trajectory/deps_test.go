package trajectory

import (
	"go/build"
	"strings"
	"testing"
)

// TestImportsNoRollcagePackage keeps trajectory plain data: every other
// package may import it, so it must import none of them. A leaf helper
// under internal/ that itself imports no rollcage package cannot close
// a cycle, and is allowed.
func TestImportsNoRollcagePackage(t *testing.T) {
	const mod = "github.com/rollcage/rollcage/"
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if !strings.HasPrefix(imp, mod) {
			continue
		}
		if strings.HasPrefix(imp, mod+"internal/") {
			dep, err := build.Import(imp, ".", 0)
			if err != nil {
				t.Fatal(err)
			}
			if !importsRollcage(dep.Imports, mod) {
				continue
			}
		}
		t.Errorf("trajectory imports %s; it must stay free of rollcage packages", imp)
	}
}

func importsRollcage(imports []string, mod string) bool {
	for _, imp := range imports {
		if strings.HasPrefix(imp, mod) {
			return true
		}
	}
	return false
}
