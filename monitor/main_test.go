package monitor

import (
	"context"
	"sync"
	"testing"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/toolcall"
)

// TestMain removes the agent the Docker-backed tests built, if they did.
func TestMain(m *testing.M) { sandboxtest.Main(m) }

// testSteps is the step each episode's last call had in the monitor's
// own tests, which number calls as the harness does: the monitor numbers
// none.
var testSteps = struct {
	sync.Mutex
	last map[*EpisodeState]int
}{last: map[*EpisodeState]int{}}

// numbered gives p the next step of ep's calls.
func numbered(ep *EpisodeState, p toolcall.Prepared) toolcall.Prepared {
	testSteps.Lock()
	defer testSteps.Unlock()
	testSteps.last[ep]++
	p.Step = testSteps.last[ep]
	return p
}

// handle takes call through ep as the harness does: numbered, then
// handed over once.
func handle(ctx context.Context, ep *EpisodeState, call toolcall.Call) (decision.CallResult, error) {
	return ep.Handle(ctx, numbered(ep, toolcall.Prepare(call)))
}

// input writes data to a streamed call's stdin once the rules had it, as
// the harness does.
func input(ctx context.Context, r *StreamedCall, data []byte) error {
	if err := r.CheckInput(ctx, data); err != nil {
		return err
	}
	return r.Process().Input(ctx, data)
}
