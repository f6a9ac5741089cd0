package trajectory

import (
	"go/build"
	"strings"
	"testing"
)

// TestImportsNoRollcagePackage keeps trajectory plain data: every other
// package may import it, so it must import none of them.
func TestImportsNoRollcagePackage(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "github.com/rollcage/rollcage/") {
			t.Errorf("trajectory imports %s; it must stay free of rollcage packages", imp)
		}
	}
}
