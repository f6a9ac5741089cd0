package monitor

import (
	"context"
	"encoding/json"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
)

// bash is a bash call of cmd.
func bash(cmd string) toolcall.Call {
	b, _ := json.Marshal(toolcall.BashArgs{Command: cmd})
	return toolcall.Call{Tool: toolcall.Bash, Args: b}
}

// newFake is a fake sandbox whose every command (rollcage's sessions
// too) exec answers by its text; nil: empty output in /workspace. It
// records what ran (fake.Sandbox.Ran), so tests can prove a blocked call
// never reached it.
func newFake(exec func(cmd string) sandbox.ExecResult) *fake.Sandbox {
	if exec == nil {
		return fake.New(sandbox.Spec{}, nil)
	}
	return fake.New(sandbox.Spec{}, func(_ context.Context, _ *fake.Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		return exec(req.Command), nil
	})
}

// fileOf is a file's content in sb, "" when there is none.
func fileOf(sb *fake.Sandbox, p string) string {
	c, _ := sb.File(p)
	return c
}
