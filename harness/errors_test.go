package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/toolcall"
)

// TestCallErrorSaysEachThingOnce: an infrastructure error from the
// sandbox reaches the caller of Call wrapped once per layer, each adding
// only what it knows: the episode and step once (the monitor's), the
// sandbox's own words, and still matchable with errors.Is.
func TestCallErrorSaysEachThingOnce(t *testing.T) {
	ctx := t.Context()
	be := &fake.Backend{}
	_, ep := startFake(ctx, t, be)
	defer ep.Close(ctx)
	if err := be.Created()[0].Close(ctx); err != nil { // the sandbox dies under the episode
		t.Fatal(err)
	}
	_, err := ep.Call(ctx, toolcall.Call{Tool: toolcall.Bash, Args: json.RawMessage(`{"command":"ls"}`)})
	if !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("Call on a closed sandbox: %v; want an error wrapping sandbox.ErrClosed", err)
	}
	msg := err.Error()
	sayOnce(t, msg, ep.ID(), "step 1", "episode")
	if !strings.HasPrefix(msg, "monitor: episode "+ep.ID()+" step 1: bash: ") {
		t.Errorf("error %q; want it to start with the monitor's episode, step and tool", msg)
	}
}

// brokenStreams is a fake backend whose sandboxes stream, but every
// Start fails as a dead connection would.
func brokenStreams() *fake.Backend {
	return &fake.Backend{Start: func(context.Context, *fake.Sandbox, sandbox.StartRequest, func(sandbox.Output)) (sandbox.Process, error) {
		return nil, fmt.Errorf("agent start: %w", sandbox.ErrClosed)
	}}
}

// TestStartErrorSaysEachThingOnce is TestCallErrorSaysEachThingOnce for
// a streamed call: the harness does not wrap the monitor's error, which
// names the episode and step, a second time.
func TestStartErrorSaysEachThingOnce(t *testing.T) {
	ctx := t.Context()
	_, ep := startFake(ctx, t, brokenStreams())
	defer ep.Close(ctx)
	_, err := ep.Start(ctx, toolcall.Call{Tool: toolcall.Bash, Args: json.RawMessage(`{"command":"ls"}`)}, false, nil)
	if !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("Start on a broken sandbox: %v; want an error wrapping sandbox.ErrClosed", err)
	}
	msg := err.Error()
	sayOnce(t, msg, ep.ID(), "step 1", "episode")
	if want := "monitor: episode " + ep.ID() + " step 1: start: agent start: "; !strings.HasPrefix(msg, want) {
		t.Errorf("error %q; want it to start with %q", msg, want)
	}
}

// sayOnce fails unless each of words appears once in msg.
func sayOnce(t *testing.T, msg string, words ...string) {
	t.Helper()
	for _, w := range words {
		if n := strings.Count(msg, w); n != 1 {
			t.Errorf("%q appears %d times in %q; want once", w, n, msg)
		}
	}
}
