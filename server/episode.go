package server

import (
	"context"
	"time"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// episode is what the gateway needs of an episode, declared where it is
// consumed: a session holds one, not a *harness.Episode, so the
// gateway's use of the harness is this list and no more.
type episode interface {
	ID() string
	Task() task.Task
	Deadline() time.Time
	Call(ctx context.Context, call monitor.ToolCall, opts ...harness.CallOption) (monitor.Result, error)
	Start(ctx context.Context, call monitor.ToolCall, opts monitor.StreamOptions) (*harness.Running, error)
	RecordModelTurn(turn trajectory.ModelTurn) error
	Finish(ctx context.Context, reason string) (harness.Outcome, error)
	Close(ctx context.Context) error
}

// forker is an episode that can fork, checked at run time the way
// net/http checks for a Flusher; one that cannot answers 501.
type forker interface {
	Fork(ctx context.Context, n int) ([]*harness.Episode, error)
}

var (
	_ episode = (*harness.Episode)(nil)
	_ forker  = (*harness.Episode)(nil)
)
