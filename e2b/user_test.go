package e2b_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/rollcage/rollcage/e2b"
	"github.com/rollcage/rollcage/e2b/envd/process"
	"github.com/rollcage/rollcage/e2b/envd/process/processconnect"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// TestProcessUser: in a root sandbox (metadata rollcage/user: root) a
// process runs as the user the SDK names; root and no user are the
// sandbox's own; a default sandbox runs every process as its own user.
func TestProcessUser(t *testing.T) {
	tests := []struct {
		meta, sdkUser, want string
	}{
		{"root", "agent", "agent"},
		{"root", "root", ""},
		{"root", "user", ""}, // the SDK's default user
		{"root", "", ""},
		{"", "agent", ""},
	}
	for _, tc := range tests {
		e := newEnv(t)
		md := map[string]string{"image": "rollcage/plain:latest"}
		if tc.meta != "" {
			md[e2b.MetaUser] = tc.meta
		}
		cr := e.create(keyA, md)
		hc := &http.Client{Transport: sandboxHeaders{id: cr.SandboxID, token: cr.EnvdAccessToken, user: tc.sdkUser}}
		proc := processconnect.NewProcessClient(hc, e.url)
		st, err := proc.Start(context.Background(), connect.NewRequest(&process.StartRequest{Process: bashCfg("true")}))
		if err != nil {
			t.Fatal(err)
		}
		for st.Receive() {
		}
		st.Close()
		calls := e.calls(cr.SandboxID)
		if len(calls) != 1 || calls[0].User != tc.want {
			t.Errorf("sandbox user %q, SDK user %q: calls %+v, want one as user %q", tc.meta, tc.sdkUser, calls, tc.want)
		}
	}
}

// calls are the tool calls the sandbox's episode recorded, in order.
func (e *env) calls(id string) []toolcall.Call {
	var calls []toolcall.Call
	e.store.Read(context.Background(), id, 0, func(ev trajectory.Event) error {
		if ev.Type == trajectory.TypeToolCall {
			var tc trajectory.ToolCall
			json.Unmarshal(ev.Data, &tc)
			var call toolcall.Call
			json.Unmarshal(tc.Call, &call)
			calls = append(calls, call)
		}
		return nil
	})
	return calls
}
