package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
)

// TestDiskLimitAttribution: a sandbox the orchestrator ended for writing
// past its disk limit (sandbox.ErrDiskLimit, a Kubernetes eviction) ends
// the episode as the policy's failure (reason disk_limit, class agent,
// not masked), ungraded; any other sandbox failure stays infrastructure.
func TestDiskLimitAttribution(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantReason  string
		wantFailure string
	}{
		{"evicted past the disk limit",
			fmt.Errorf("kube: pod p evicted by the kubelet for writing past its ephemeral-storage limit of 64Mi: %w", sandbox.ErrDiskLimit),
			ReasonDiskLimit, FailureAgent},
		{"sandbox lost", fmt.Errorf("kube: pod p was deleted: %w", sandbox.ErrClosed), ReasonSandbox, FailureInfrastructure},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &fake.Backend{Exec: func(ctx context.Context, sb *fake.Sandbox, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
				if strings.Contains(req.Command, "dd ") {
					return sandbox.ExecResult{}, tc.err
				}
				return fake.Echo(ctx, sb, req)
			}}
			r, _ := testRunner(t, b, Limits{})
			script := task.Script{Task: "any", Name: "fill", Kind: task.KindClean, Steps: []task.Step{
				{Tool: toolcall.Bash, Args: json.RawMessage(`{"command":"echo start"}`)},
				{Tool: toolcall.Bash, Args: json.RawMessage(`{"command":"dd if=/dev/zero of=/tmp/fill bs=1M count=256"}`)},
				{Tool: toolcall.Submit, Args: json.RawMessage(`{}`)},
			}}
			o, err := r.Run(t.Context(), fakeTask, fakeHidden, EpisodeMeta{}, Replay{Script: script})
			if err != nil {
				t.Fatal(err)
			}
			if o.Reason != tc.wantReason || o.FailureClass != tc.wantFailure {
				t.Errorf("outcome reason %q, failure %q; want %q, %q (error %q)", o.Reason, o.FailureClass, tc.wantReason, tc.wantFailure, o.Error)
			}
			if !strings.Contains(o.Error, tc.err.Error()) {
				t.Errorf("outcome error %q does not carry the sandbox's %q", o.Error, tc.err)
			}
			if o.Resolved || o.Reward != 0 {
				t.Errorf("resolved %v, reward %v; want an ungraded episode", o.Resolved, o.Reward)
			}
		})
	}
}
