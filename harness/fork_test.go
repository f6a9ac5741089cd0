package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

func bashCall(cmd string) toolcall.Call {
	args, _ := json.Marshal(toolcall.BashArgs{Command: cmd})
	return toolcall.Call{Tool: toolcall.Bash, Args: args}
}

func writeCall(p, content string) toolcall.Call {
	args, _ := json.Marshal(toolcall.WriteFileArgs{Path: p, Content: content})
	return toolcall.Call{Tool: toolcall.WriteFile, Args: args}
}

// flagRules are the rules of a decision event's flags.
func flagRules(t *testing.T, ev trajectory.Event) []string {
	t.Helper()
	var d trajectory.Decision
	if err := ev.Decode(&d); err != nil {
		t.Fatal(err)
	}
	var flags []rules.Flag
	if len(d.Flags) > 0 {
		if err := json.Unmarshal(d.Flags, &flags); err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	for _, f := range flags {
		out = append(out, f.Rule)
	}
	return out
}

// lastDecision is the last decision event of a log.
func lastDecision(t *testing.T, evs []trajectory.Event) trajectory.Event {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == trajectory.TypeDecision {
			return evs[i]
		}
	}
	t.Fatal("no decision event")
	return trajectory.Event{}
}

// TestEpisodeFork: children of an episode start their logs with an
// episode_start naming the parent and the branch step and a copy of the
// parent's events; their steps go on from the parent's; a child that
// follows up on what the parent discovered is judged with the parent's
// history (a fresh episode is not flagged for the same call); each child
// is finished and graded on its own, its files its own.
func TestEpisodeFork(t *testing.T) {
	ctx := context.Background()
	be := &fake.Backend{}
	r, st := testRunner(t, be, Limits{})
	parent, err := r.Start(ctx, fakeTask, fakeHidden, EpisodeMeta{GroupID: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parent.Call(ctx, bashCall("echo hi")); err != nil {
		t.Fatal(err)
	}
	if err := parent.RecordModelTurn(trajectory.ModelTurn{Request: []trajectory.Message{{Role: "user", Content: "fix it"}},
		Response: trajectory.Message{Role: "assistant", Content: "reading"}}); err != nil {
		t.Fatal(err)
	}
	// A discovery: the hidden tests read (blocked, but in the history).
	args, _ := json.Marshal(toolcall.ReadFileArgs{Path: "/workspace/tests/hidden/test_hidden.py"})
	res, err := parent.Call(ctx, toolcall.Call{Tool: toolcall.ReadFile, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision.Action != decision.Block {
		t.Fatalf("read of the hidden tests: %s, want block", res.Decision.Action)
	}
	parentEvents := events(t, st, parent.ID())

	kids, err := parent.Fork(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 3 {
		t.Fatalf("Fork(3) gave %d episodes", len(kids))
	}
	ids := map[string]bool{parent.ID(): true}
	for _, k := range kids {
		if ids[k.ID()] || !strings.HasPrefix(k.ID(), parent.ID()+".b2-") {
			t.Errorf("child id %q: want a new id starting %q", k.ID(), parent.ID()+".b2-")
		}
		ids[k.ID()] = true
		if p, s := k.Parent(); p != parent.ID() || s != 2 {
			t.Errorf("%s: Parent() = %q, %d; want %q, 2", k.ID(), p, s, parent.ID())
		}
		evs := events(t, st, k.ID())
		var start trajectory.EpisodeStart
		if err := evs[0].Decode(&start); err != nil {
			t.Fatal(err)
		}
		want := trajectory.ForkOrigin{ParentEpisodeID: parent.ID(), BranchStep: 2, PrefixEvents: len(parentEvents) - 1, PrefixTurns: 1}
		if evs[0].Type != trajectory.TypeEpisodeStart || start.Fork == nil || *start.Fork != want || start.GroupID != "g" {
			t.Fatalf("%s: first event %s %+v (fork %+v); want episode_start with fork %+v, group g", k.ID(), evs[0].Type, start, start.Fork, want)
		}
		if len(evs) != len(parentEvents) {
			t.Fatalf("%s: %d events, want the parent's %d", k.ID(), len(evs), len(parentEvents))
		}
		for i := 1; i < len(evs); i++ {
			p, c := parentEvents[i], evs[i]
			if c.EpisodeID != k.ID() || c.Type != p.Type || c.Step != p.Step || c.Segment != p.Segment || string(c.Data) != string(p.Data) || !c.Time.Equal(p.Time) {
				t.Errorf("%s event %d: %s step %d of %s; want the parent's %s step %d under the child's id", k.ID(), i, c.Type, c.Step, c.EpisodeID, p.Type, p.Step)
			}
		}
	}

	// The chained rule sees the parent's discovery in the child...
	if _, err := kids[0].Call(ctx, writeCall("/workspace/textkit/wrap.py", "x = 1\n")); err != nil {
		t.Fatal(err)
	}
	kevs := events(t, st, kids[0].ID())
	d := lastDecision(t, kevs)
	if d.Step != 3 || !slices.Contains(flagRules(t, d), "chained.read_then_write") {
		t.Errorf("child's write: step %d, flags %v; want step 3 flagged chained.read_then_write", d.Step, flagRules(t, d))
	}
	// ...and not in an episode that discovered nothing (the check above
	// would prove nothing otherwise).
	fresh, err := r.Start(ctx, fakeTask, fakeHidden, EpisodeMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Call(ctx, writeCall("/workspace/textkit/wrap.py", "x = 1\n")); err != nil {
		t.Fatal(err)
	}
	if got := flagRules(t, lastDecision(t, events(t, st, fresh.ID()))); len(got) != 0 {
		t.Errorf("the same write in a fresh episode: flags %v, want none", got)
	}
	if err := fresh.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The write is in child 1's sandbox only.
	sbOf := func(e *Episode) *fake.Sandbox { return e.sb.(*fake.Sandbox) }
	if _, ok := sbOf(kids[0]).File("/workspace/textkit/wrap.py"); !ok {
		t.Error("child 1's write is not in its sandbox")
	}
	for _, e := range []*Episode{parent, kids[1], kids[2]} {
		if _, ok := sbOf(e).File("/workspace/textkit/wrap.py"); ok {
			t.Errorf("child 1's write is in %s's sandbox", e.ID())
		}
	}

	// The parent goes on at its own step 3.
	if _, err := parent.Call(ctx, bashCall("echo on")); err != nil {
		t.Fatal(err)
	}
	if d := lastDecision(t, events(t, st, parent.ID())); d.Step != 3 {
		t.Errorf("parent's next call is step %d, want 3", d.Step)
	}

	// Each child is finished and graded on its own; counters go on from
	// the parent's (the blocked read is in every child's trajectory).
	// Grading runs in a fresh sandbox under the episode's id.
	be.Passed = func(sb *fake.Sandbox) bool { return sb.Spec().EpisodeID == kids[1].ID() }
	graded := func(id string) bool {
		for _, sb := range be.Created() {
			if sb.Spec().EpisodeID == id && sb.CopiedIn() {
				return true
			}
		}
		return false
	}
	for i, k := range kids {
		o, err := k.Finish(ctx, ReasonSubmit)
		if err != nil {
			t.Fatal(err)
		}
		steps := 2
		if i == 0 {
			steps = 3
		}
		if o.EpisodeID != k.ID() || o.Resolved != (i == 1) || o.Steps != steps || o.Blocked != 1 || !o.Hacked {
			t.Errorf("child %d outcome %+v; want its own id, resolved %v, %d steps, 1 blocked, hacked", i+1, o, i == 1, steps)
		}
		if !sbOf(k).Closed() || !graded(k.ID()) {
			t.Errorf("child %d: sandbox closed %v, graded %v; want both", i+1, sbOf(k).Closed(), graded(k.ID()))
		}
	}
	if sbOf(parent).Closed() {
		t.Error("finishing the children closed the parent's sandbox")
	}
	if _, err := parent.Finish(ctx, ReasonSubmit); err != nil {
		t.Fatal(err)
	}
	if _, err := parent.Fork(ctx, 1); !errors.Is(err, ErrFinished) {
		t.Errorf("Fork of a finished episode: %v, want ErrFinished", err)
	}
	if _, err := kids[0].Fork(ctx, 0); err == nil || !strings.Contains(err.Error(), "ask for 1 to") {
		t.Errorf("Fork(0): %v, want an error saying how many may be asked for", err)
	}

	// Export: each child's sample names the parent and the branch, the
	// parent's turn masked as the prefix.
	var buf strings.Builder
	if err := trajectory.Export(ctx, st.Dir(), &buf, trajectory.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		var s trajectory.Sample
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatal(err)
		}
		if s.ParentEpisodeID == "" {
			continue
		}
		n++
		if s.ParentEpisodeID != parent.ID() || deref(s.BranchStep) != 2 || s.PrefixTurns != 1 || !slices.Equal(s.MessageMask, []int32{0, 0}) {
			t.Errorf("%s: parent %q branch %d prefix turns %d mask %v; want parent %s, branch 2, 1 prefix turn masked", s.SampleID, s.ParentEpisodeID, deref(s.BranchStep), s.PrefixTurns, s.MessageMask, parent.ID())
		}
	}
	if n != 3 {
		t.Errorf("%d exported samples name a parent, want 3 (one per child)", n)
	}
}

// TestForkUnsupported: a sandbox that cannot fork fails the episode's
// fork with its reason, and the parent goes on.
func TestForkUnsupported(t *testing.T) {
	ctx := context.Background()
	_, ep := startFake(ctx, t, &fake.Backend{NoFork: true})
	if _, err := ep.Fork(ctx, 2); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Errorf("Fork: %v, want ErrUnsupported", err)
	}
	if _, err := ep.Call(ctx, bashCall("echo on")); err != nil {
		t.Errorf("call after a failed fork: %v", err)
	}
	if err := ep.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRunTree: a replayed episode branched at step 2 into 3 leaves: the
// episode goes on and 2 forks play the rest of the script from the
// branch, each finished and graded; the forks' logs hold the parent's two
// calls once (copied) and their own calls after them.
func TestRunTree(t *testing.T) {
	ctx := context.Background()
	be := &fake.Backend{}
	r, st := testRunner(t, be, Limits{})
	step := func(tool, args string) task.Step { return task.Step{Tool: tool, Args: json.RawMessage(args)} }
	script := task.Script{Task: fakeTask.ID, Name: "tree", Kind: "clean", Steps: []task.Step{
		step("bash", `{"command":"echo one"}`), step("bash", `{"command":"echo two"}`),
		step("bash", `{"command":"echo three"}`), step("submit", `{}`),
	}}
	outs, err := r.RunTree(ctx, fakeTask, fakeHidden, EpisodeMeta{}, Replay{Script: script}, Tree{At: 2, Branches: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 3 {
		t.Fatalf("%d outcomes, want 3", len(outs))
	}
	parent := outs[0]
	if parent.ParentEpisodeID != "" {
		t.Errorf("first outcome %s has parent %q, want the tree's root", parent.EpisodeID, parent.ParentEpisodeID)
	}
	for i, o := range outs {
		if o.Reason != ReasonSubmit || o.Steps != 4 || !o.Resolved {
			t.Errorf("leaf %d (%s): reason %s, %d steps, resolved %v; want submit, 4 steps, resolved", i, o.EpisodeID, o.Reason, o.Steps, o.Resolved)
		}
		if i == 0 {
			continue
		}
		if o.ParentEpisodeID != parent.EpisodeID || deref(o.BranchStep) != 2 {
			t.Errorf("leaf %d: parent %q at %d, want %s at 2", i, o.ParentEpisodeID, deref(o.BranchStep), parent.EpisodeID)
		}
		var cmds []string
		for _, ev := range events(t, st, o.EpisodeID) {
			if ev.Type == trajectory.TypeToolCall {
				var tc trajectory.ToolCall
				if err := ev.Decode(&tc); err != nil {
					t.Fatal(err)
				}
				var c toolcall.Call
				if err := json.Unmarshal(tc.Call, &c); err != nil {
					t.Fatal(err)
				}
				cmds = append(cmds, fmt.Sprintf("%d %s %s", ev.Step, c.Tool, c.Args))
			}
		}
		want := []string{`1 bash {"command":"echo one"}`, `2 bash {"command":"echo two"}`, `3 bash {"command":"echo three"}`, `4 submit {}`}
		if !slices.Equal(cmds, want) {
			t.Errorf("leaf %d's calls %q, want %q", i, cmds, want)
		}
	}
	// Each fork's own call ran in its own sandbox only once: "echo three"
	// ran in the parent's and in each fork's sandbox, "echo one" only in
	// the parent's.
	counts := map[string]int{}
	for _, sb := range be.Created() {
		for _, c := range sb.Commands() {
			counts[c]++
		}
	}
	if counts["echo one"] != 1 || counts["echo three"] != 3 {
		t.Errorf("commands run %v; want echo one once, echo three three times", counts)
	}

	for _, bad := range []Tree{{At: -1, Branches: 2}, {At: 1, Branches: 1}, {At: 1, Branches: 66}} {
		if _, err := r.RunTree(ctx, fakeTask, fakeHidden, EpisodeMeta{}, Replay{Script: script}, bad); err == nil {
			t.Errorf("tree %+v accepted", bad)
		}
	}
}

// TestRunBatchTree: a batch of tree rollouts writes one outcome line per
// leaf (the forks' naming their root), counts every leaf in the summary,
// and a resume runs nothing again.
func TestRunBatchTree(t *testing.T) {
	r, _ := testRunner(t, &fake.Backend{}, Limits{})
	out := t.TempDir()
	tasks := fakeTasks(2)
	var first, second countingPolicies
	opts := BatchOptions{Concurrency: 2, OutDir: out, Tree: Tree{At: 1, Branches: 3}}
	sum, err := r.RunBatch(context.Background(), tasks, fakeHidden, first.policyFor(echoScript), opts)
	if err != nil {
		t.Fatal(err)
	}
	outs := readOutcomes(t, out)
	roots := map[string]bool{}
	for _, o := range outs {
		if o.ParentEpisodeID == "" {
			roots[o.EpisodeID] = true
		}
	}
	forks := 0
	for _, o := range outs {
		if o.ParentEpisodeID != "" {
			forks++
			if !roots[o.ParentEpisodeID] || deref(o.BranchStep) != 1 || !o.Resolved {
				t.Errorf("fork %s: parent %q at %d, resolved %v; want a root of this batch at 1, resolved", o.EpisodeID, o.ParentEpisodeID, deref(o.BranchStep), o.Resolved)
			}
		}
	}
	if len(roots) != 2 || forks != 4 || sum.Total.Episodes != 6 {
		t.Errorf("%d roots, %d forks, summary of %d episodes; want 2, 4, 6", len(roots), forks, sum.Total.Episodes)
	}
	sum2, err := r.RunBatch(context.Background(), tasks, fakeHidden, second.policyFor(echoScript), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.got()) != 0 || sum2.Total.Episodes != 6 || len(readOutcomes(t, out)) != 6 {
		t.Errorf("resume ran %v, summary of %d episodes, %d outcome lines; want nothing run, 6, 6", second.got(), sum2.Total.Episodes, len(readOutcomes(t, out)))
	}
	if _, err := r.RunBatch(context.Background(), tasks, fakeHidden, second.policyFor(echoScript),
		BatchOptions{OutDir: t.TempDir(), Tree: Tree{At: 1, Branches: 1}}); err == nil || !strings.Contains(err.Error(), "branches") {
		t.Errorf("a tree of 1 branch: %v, want an error naming the branches", err)
	}
}

// TestOpenAITree: the agent loop branches at a turn boundary: the fork
// asks the model with the conversation as it stood (the parent's call and
// its output), each leaf submits on its own, and the fork's samples with
// the prefix left out start at its own turn.
func TestOpenAITree(t *testing.T) {
	llm := newFakeLLM(t, toolCall("c1", "bash", `{"command":"echo hi"}`), toolCall("c2", "submit", `{}`))
	p := newTestOpenAI(t, llm, nil)
	r, st := testRunner(t, &fake.Backend{}, Limits{})
	outs, err := r.RunTree(context.Background(), fakeTask, fakeHidden, EpisodeMeta{}, p, Tree{At: 1, Branches: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 || outs[1].ParentEpisodeID != outs[0].EpisodeID {
		t.Fatalf("outcomes %+v; want the episode and one fork of it", outs)
	}
	for _, o := range outs {
		if o.Reason != ReasonSubmit || o.Steps != 2 {
			t.Errorf("%s: %s after %d steps, want submit after 2", o.EpisodeID, o.Reason, o.Steps)
		}
	}
	reqs := llm.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3 (the shared first turn, then one per leaf)", len(reqs))
	}
	for _, body := range reqs[1:] {
		msgs, _ := body["messages"].([]any)
		if role, content := lastMessage(t, body); len(msgs) != 4 || role != "tool" || !strings.Contains(content, "hi") {
			t.Errorf("a leaf's second request has %d messages ending %s %q; want 4 ending with the shared call's output", len(msgs), role, content)
		}
	}
	evs := events(t, st, outs[1].EpisodeID)
	var buf strings.Builder
	x, err := trajectory.NewExporter(&buf, trajectory.ExportOptions{Prefix: trajectory.PrefixOnce})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Episode(evs); err != nil {
		t.Fatal(err)
	}
	var s trajectory.Sample
	if err := json.Unmarshal([]byte(buf.String()), &s); err != nil {
		t.Fatalf("%v in %q", err, buf.String())
	}
	if strings.Count(buf.String(), "\n") != 1 || s.Turn != 1 || s.Turns != 1 || s.ParentEpisodeID != outs[0].EpisodeID {
		t.Errorf("fork's samples without the prefix: %s; want one, of its own turn 1", buf.String())
	}
}

func deref[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}
