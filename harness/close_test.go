package harness

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// TestCloseEndsTheLog: an episode closed without grading (the gateway's
// DELETE, idle timeout, shutdown) ends its log with an abandoned,
// infrastructure-class episode_end, so it reaches the finished feed; the
// hidden tests never enter the sandbox; Finish afterwards reports the same.
func TestCloseEndsTheLog(t *testing.T) {
	ctx := context.Background()
	be := &fake.Backend{}
	st, ep := startFake(ctx, t, be)
	if _, err := ep.Call(ctx, toolcall.Call{Tool: toolcall.Bash, Args: json.RawMessage(`{"command":"ls"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := ep.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ep.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	evs := events(t, st, ep.ID())
	last := evs[len(evs)-1]
	if last.Type != trajectory.TypeEpisodeEnd {
		t.Fatalf("last event %s; want episode_end", last.Type)
	}
	var end trajectory.EpisodeEnd
	if err := json.Unmarshal(last.Data, &end); err != nil {
		t.Fatal(err)
	}
	if end.FailureClass != FailureInfrastructure || end.Reason != ReasonAbandoned+": closed without grading" || end.Counts.ToolCalls != 1 || end.Resolved {
		t.Errorf("episode_end %+v; want abandoned, infrastructure, 1 call, not resolved", end)
	}
	info, err := st.Info(ep.ID())
	if err != nil || !info.Finished {
		t.Errorf("store info %+v, %v; want the episode finished", info, err)
	}
	if be.Created()[0].CopiedIn() {
		t.Error("hidden tests were copied into a closed episode's sandbox")
	}
	o, err := ep.Finish(ctx, ReasonSubmit)
	if err != nil || o.Reason != ReasonAbandoned || o.FailureClass != FailureInfrastructure {
		t.Errorf("Finish after Close: %+v, %v; want the abandoned outcome", o, err)
	}
}
