package harness

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
)

// TestCallErrorSaysEachThingOnce: an infrastructure error from the
// sandbox reaches the caller of Call wrapped once per layer, each adding
// only what it knows: the episode and step once (the monitor's), the
// sandbox's own words, and still matchable with errors.Is.
func TestCallErrorSaysEachThingOnce(t *testing.T) {
	ctx := t.Context()
	be := &fake.Backend{}
	r, _ := testRunner(t, be, Limits{})
	ep, err := r.Start(ctx, fakeTask, fakeHidden, EpisodeMeta{})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close(ctx)
	if err := be.Created()[0].Close(ctx); err != nil { // the sandbox dies under the episode
		t.Fatal(err)
	}
	_, err = ep.Call(ctx, monitor.ToolCall{Tool: monitor.ToolBash, Args: json.RawMessage(`{"command":"ls"}`)})
	if !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("Call on a closed sandbox: %v; want an error wrapping sandbox.ErrClosed", err)
	}
	msg := err.Error()
	for _, once := range []string{ep.ID(), "step 1", "episode"} {
		if n := strings.Count(msg, once); n != 1 {
			t.Errorf("%q appears %d times in %q; want once", once, n, msg)
		}
	}
	if !strings.HasPrefix(msg, "monitor: episode "+ep.ID()+" step 1: bash: ") {
		t.Errorf("error %q; want it to start with the monitor's episode, step and tool", msg)
	}
}
