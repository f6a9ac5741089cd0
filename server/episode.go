package server

import (
	"context"
	"time"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// What the gateway needs of an episode, declared where it is consumed and
// split by what each part of the gateway does with it: a session holds an
// episode (not a *harness.Episode), so the gateway's use of the harness is
// these lists and no more.

// toolCaller takes the policy's tool calls: /calls, MCP, Server.Call and
// Server.Start (the E2B API's streamed commands).
type toolCaller interface {
	Call(ctx context.Context, call toolcall.Call, opts ...harness.CallOption) (decision.CallResult, error)
	Start(ctx context.Context, call toolcall.Call, stdin bool, out func(sandbox.Output)) (*harness.Running, error)
}

// turnRecorder records the model turns the recording proxy relays.
type turnRecorder interface {
	RecordModelTurn(turn trajectory.ModelTurn) error
}

// ender ends an episode: graded (submit, a limit) or closed (DELETE, the
// idle reaper, shutdown).
type ender interface {
	Finish(ctx context.Context, reason string) (harness.Outcome, error)
	FinishExternal(ctx context.Context, x harness.External) (harness.Outcome, error)
	// Standing is the outcome so far (label and counts while running).
	Standing() harness.Outcome
	Close(ctx context.Context) error
}

// episode is what a session holds for the episode's life.
type episode interface {
	toolCaller
	turnRecorder
	ender
}

// started is an episode as the runner (or a fork) hands it over: what it
// is, read once when its session is made, besides what the session holds.
type started interface {
	episode
	ID() string
	Task() task.Task
	Deadline() time.Time
}

// forker is an episode that can fork, checked at run time the way
// net/http checks for a Flusher; one that cannot answers 501.
type forker interface {
	Fork(ctx context.Context, n int) ([]*harness.Episode, error)
}

var (
	_ started = (*harness.Episode)(nil)
	_ forker  = (*harness.Episode)(nil)
)
