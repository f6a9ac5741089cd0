package monitor

import (
	"context"
	"encoding/json"

	"github.com/rollcage/rollcage/judge"
	"github.com/rollcage/rollcage/rules"
)

// JudgeSubmission asks the pipeline's judge about flags raised on the
// submitted change at grading (a file on the grader's load path, literals
// of the hidden tests): the judge may clear a flag when the task's
// instruction asks for such a change. call is the submit check as a
// ToolCall-shaped JSON holding the file and its change. ok is false when
// no judge is configured; a judge that fails answers Undecided.
func (p *Pipeline) JudgeSubmission(ctx context.Context, task TaskContext, episodeID string, call json.RawMessage, flags []rules.Flag) (v judge.Verdict, ok bool) {
	if p.cfg.Judge == nil {
		return judge.Verdict{}, false
	}
	req := judge.Request{EpisodeID: episodeID, TaskID: task.ID, Instruction: task.Instruction, Protected: task.ProtectedPaths, Call: call}
	for _, f := range flags {
		req.Flags = append(req.Flags, judge.Flag(f))
	}
	v, err := p.cfg.Judge.Judge(ctx, req)
	if err != nil && !v.Undecided {
		v = judge.Verdict{Undecided: true, Err: judge.ReasonServer + ": " + err.Error()}
	}
	return v, true
}
