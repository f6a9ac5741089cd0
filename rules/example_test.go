package rules_test

import (
	"context"
	"fmt"

	"github.com/rollcage/rollcage/rules"
)

func ExampleEngine_NewEpisode() {
	ctx := context.Background()
	eng, err := rules.New(ctx, rules.Config{})
	if err != nil {
		panic(err)
	}
	ep := eng.NewEpisode(ctx,
		map[string]any{"workdir": "/workspace", "protected_paths": []string{"/opt/grader/**"}},
		map[string]any{"non_ancestor_commits": []string{"9f2c4e1d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d"}},
	)
	call := map[string]any{"tool": "read_file", "args": map[string]any{"path": "/opt/grader/grade.py"}}
	normalized := map[string]any{"tool": "read_file", "raw": "/opt/grader/grade.py", "reads": []string{"/opt/grader/grade.py"}}
	flags, err := ep.Eval(ctx, call, normalized)
	if err != nil {
		panic(err)
	}
	for _, f := range flags {
		fmt.Println(f.Rule, f.Category, f.Severity, f.Evidence)
	}
	ep.Record(call, normalized, flags, rules.Shown{}) // later calls see it in input.history
	// Output:
	// protected.name protected_access certain /opt/grader
	// protected.name protected_access certain /opt/grader/grade.py
	// protected.path protected_access certain /opt/grader/grade.py
	// protected.text protected_access certain /opt/grader
}
