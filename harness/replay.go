package harness

import (
	"context"
	"errors"
	"fmt"

	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

// Replay is the offline policy: it plays a script's steps in order, one
// call per turn, and stops at submit or at the end of the script. Each step
// is also recorded as a model turn (model "replay"), so that a replayed
// episode exports like a live one.
type Replay struct {
	Script task.Script
}

var _ Policy = Replay{}

// Run plays the script. In a tree rollout the forks play the rest of it
// too.
func (p Replay) Run(ctx context.Context, ep *Episode) (string, error) {
	conv := []trajectory.Message{
		{Role: trajectory.RoleSystem, Content: "replay of script " + p.Script.Task + "/" + p.Script.Name + " (" + p.Script.Kind + ")"},
		{Role: trajectory.RoleUser, Content: ep.Task().Instruction},
	}
	return p.play(ctx, ep, 0, conv)
}

// play plays the script from step from on, conv the conversation so far
// (never appended to in place, so a branch may keep it).
func (p Replay) play(ctx context.Context, ep *Episode, from int, conv []trajectory.Message) (string, error) {
	for i := from; i < len(p.Script.Steps); i++ {
		// The branch gets the conversation as it is now: conv is
		// reassigned below while the branch may already be playing.
		prefix := conv
		ep.Branch(func(child *Episode) func(context.Context) (string, error) {
			return func(ctx context.Context) (string, error) { return p.play(ctx, child, i, prefix) }
		})
		st := p.Script.Steps[i]
		id := fmt.Sprintf("replay_%d", i)
		resp := trajectory.Message{Role: trajectory.RoleAssistant, ToolCalls: []trajectory.FunctionCall{{
			ID: id, Type: "function", Function: trajectory.Function{Name: st.Tool, Arguments: string(st.Args)}}}}
		if err := ep.RecordModelTurn(trajectory.ModelTurn{Model: "replay", Request: conv, Response: resp, FinishReason: "tool_calls"}); err != nil {
			return ReasonSandbox, err
		}
		res, err := ep.Call(ctx, toolcall.Call{Tool: st.Tool, Args: st.Args, RequestID: id})
		switch {
		case err == nil:
		case LimitReason(err) != "":
			return LimitReason(err), nil
		case errors.Is(err, ErrFinished):
			return ReasonCancelled, nil
		case ctx.Err() != nil:
			return "", ctx.Err()
		default:
			return sandboxReason(err), err
		}
		if res.Submit {
			return ReasonSubmit, nil
		}
		conv = append(conv[:len(conv):len(conv)], resp,
			trajectory.Message{Role: trajectory.RoleTool, ToolCallID: id, Name: st.Tool, Content: res.Output})
	}
	return ReasonEndOfScript, nil
}
