package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollcage/rollcage/internal/golden"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
	"github.com/rollcage/rollcage/trajectory/trajectorytest"
)

func fakeTasks(n int) []task.Task {
	var ts []task.Task
	for i := 1; i <= n; i++ {
		t := fakeTask
		t.ID = fmt.Sprintf("t%d", i)
		ts = append(ts, t)
	}
	return ts
}

var echoScript = task.Script{Task: "any", Name: "echo", Kind: task.KindClean, Steps: []task.Step{
	{Tool: toolcall.Bash, Args: json.RawMessage(`{"command":"echo fixed"}`)},
	{Tool: toolcall.Submit, Args: json.RawMessage(`{}`)},
}}

// blockPolicy never finishes on its own: it stands for an episode in
// flight when the process is killed.
type blockPolicy struct{ started chan<- struct{} }

func (p blockPolicy) Run(ctx context.Context, ep *Episode) (string, error) {
	if p.started != nil {
		p.started <- struct{}{}
	}
	<-ctx.Done()
	return "", ctx.Err()
}

// countingPolicies hands out echo replays and counts who asked.
type countingPolicies struct {
	mu  sync.Mutex
	ran []string // guarded by mu
}

func (c *countingPolicies) policyFor(s task.Script) PolicyFor {
	return func(t task.Task, attempt int) (Policy, error) {
		c.mu.Lock()
		c.ran = append(c.ran, fmt.Sprintf("%s#%d", t.ID, attempt))
		c.mu.Unlock()
		return Replay{Script: s}, nil
	}
}

func (c *countingPolicies) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.ran)
	slices.Sort(out)
	return out
}

func readOutcomes(t testing.TB, dir string) []Outcome {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, OutcomesFile))
	if err != nil {
		t.Fatal(err)
	}
	var outs []Outcome
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var o Outcome
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("outcomes line %q: %v", sc.Text(), err)
		}
		outs = append(outs, o)
	}
	return outs
}

func keysOf(outs []Outcome) []string {
	var ks []string
	for _, o := range outs {
		ks = append(ks, fmt.Sprintf("%s#%d", o.TaskID, o.Attempt))
	}
	slices.Sort(ks)
	return ks
}

func TestRunBatchResumes(t *testing.T) {
	r, st := testRunner(t, &fake.Backend{}, Limits{})
	out := t.TempDir()
	tasks := fakeTasks(3)
	var first countingPolicies
	var progress bytes.Buffer
	sum, err := r.RunBatch(context.Background(), tasks, fakeHidden, first.policyFor(echoScript),
		BatchOptions{Concurrency: 2, Attempts: 2, OutDir: out, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"t1#0", "t1#1", "t2#0", "t2#1", "t3#0", "t3#1"}
	if diff := cmp.Diff(all, first.got()); diff != "" {
		t.Errorf("first run ran (-want +got):\n%s", diff)
	}
	if sum.Total.Episodes != 6 || sum.Total.CleanResolutions != 6 || len(sum.Tasks) != 3 {
		t.Errorf("summary total %+v over %d tasks, want 6 clean resolutions over 3", sum.Total, len(sum.Tasks))
	}
	if !strings.Contains(progress.String(), "6/6 episodes") {
		t.Errorf("progress never said 6/6: %q", progress.String())
	}

	// A crash between an episode's end and its outcome line (here: the
	// line torn mid-write) leaves a finished trajectory without an outcome.
	// The resume rebuilds that outcome from the trajectory instead of
	// running the pair again, so export sees one episode per (task,
	// attempt).
	// Each line names the episode's group: the attempts of one task.
	groups := map[string]string{}
	for _, o := range readOutcomes(t, out) {
		if o.GroupID == "" || (groups[o.TaskID] != "" && groups[o.TaskID] != o.GroupID) {
			t.Errorf("outcome of %s#%d: group_id %q, want one non-empty group per task (%q)", o.TaskID, o.Attempt, o.GroupID, groups[o.TaskID])
		}
		groups[o.TaskID] = o.GroupID
	}
	last := tearLastOutcome(t, out)
	var second countingPolicies
	sum2, err := r.RunBatch(context.Background(), tasks, fakeHidden, second.policyFor(echoScript),
		BatchOptions{Concurrency: 2, Attempts: 2, OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if got := second.got(); len(got) != 0 {
		t.Errorf("resume ran %v, want nothing: the episode had finished", got)
	}
	after := readOutcomes(t, out)
	if diff := cmp.Diff(all, keysOf(after)); diff != "" {
		t.Errorf("outcomes after resume (-want +got):\n%s", diff)
	}
	rec := after[len(after)-1]
	if !rec.Recovered || rec.EpisodeID != last.EpisodeID {
		t.Errorf("recovered outcome %+v, want episode %s marked recovered", rec, last.EpisodeID)
	}
	rec.Recovered, rec.Duration, rec.Overhead, last.Duration, last.Overhead = false, 0, 0, 0, 0
	if diff := cmp.Diff(last, rec); diff != "" {
		t.Errorf("recovered outcome differs from the one lost (-lost +recovered):\n%s", diff)
	}
	if sum2.Total.Episodes != 6 || sum2.Total.CleanResolutions != 6 {
		t.Errorf("summary after resume %+v, want 6 clean resolutions", sum2.Total)
	}
	var exp bytes.Buffer
	if err := trajectory.Export(context.Background(), st.Dir(), &exp, trajectory.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	episodes := map[string]string{} // task#attempt → episode
	for _, line := range strings.Split(strings.TrimSpace(exp.String()), "\n") {
		var smp trajectory.Sample
		if err := json.Unmarshal([]byte(line), &smp); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprintf("%s#%d", smp.TaskID, smp.Attempt)
		if prev, ok := episodes[k]; ok && prev != smp.EpisodeID {
			t.Errorf("export holds two episodes of %s: %s and %s", k, prev, smp.EpisodeID)
		}
		episodes[k] = smp.EpisodeID
	}
	if len(episodes) != 6 {
		t.Errorf("export covers %d (task, attempt) pairs, want 6", len(episodes))
	}

	// A batch in another directory over the same store adopts none of them.
	var third countingPolicies
	if _, err := r.RunBatch(context.Background(), tasks[:1], fakeHidden, third.policyFor(echoScript),
		BatchOptions{Attempts: 1, OutDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"t1#0"}, third.got()); diff != "" {
		t.Errorf("another batch ran (-want +got):\n%s", diff)
	}
}

// tearLastOutcome cuts the last outcome line in half, as a crash between
// an episode's end and its outcome line leaves it, and returns the
// outcome lost.
func tearLastOutcome(t *testing.T, out string) Outcome {
	t.Helper()
	outs := readOutcomes(t, out)
	b, _ := json.Marshal(outs[len(outs)-1])
	p := filepath.Join(out, OutcomesFile)
	body, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	body = bytes.TrimSuffix(body, append(b, '\n'))
	if err := os.WriteFile(p, append(body, b[:len(b)/2]...), 0o644); err != nil {
		t.Fatal(err)
	}
	return outs[len(outs)-1]
}

// TestRunBatchResumesElsewhere: a batch whose last outcome line a crash
// lost, resumed from its output directory moved or copied elsewhere,
// recovers that outcome from the trajectory instead of running the pair
// again; a trajectory the crash left corrupt is skipped with a warning
// (its pair runs again) instead of failing the resume.
func TestRunBatchResumesElsewhere(t *testing.T) {
	tests := []struct {
		name    string
		move    func(t *testing.T, from, to string)
		corrupt bool // spoil the lost outcome's trajectory
	}{
		{"moved", func(t *testing.T, from, to string) {
			if err := os.Rename(from, to); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"copied", func(t *testing.T, from, to string) {
			if err := os.CopyFS(to, os.DirFS(from)); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"moved, trajectory corrupt", func(t *testing.T, from, to string) {
			if err := os.Rename(from, to); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, st := testRunner(t, &fake.Backend{}, Limits{})
			var logs bytes.Buffer
			r.log = slog.New(slog.NewTextHandler(&logs, nil))
			tasks := fakeTasks(2)
			root := t.TempDir()
			from, to := filepath.Join(root, "out"), filepath.Join(root, "elsewhere")
			var first countingPolicies
			if _, err := r.RunBatch(context.Background(), tasks, fakeHidden, first.policyFor(echoScript),
				BatchOptions{Concurrency: 1, OutDir: from}); err != nil {
				t.Fatal(err)
			}
			lost := tearLastOutcome(t, from)
			tc.move(t, from, to)
			want := []string{}
			if tc.corrupt {
				trajectorytest.CorruptLine(t, st.File(lost.EpisodeID), 1)
				want = []string{lost.TaskID + "#0"}
			}
			var resume countingPolicies
			if _, err := r.RunBatch(context.Background(), tasks, fakeHidden, resume.policyFor(echoScript),
				BatchOptions{Concurrency: 1, OutDir: to}); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, resume.got(), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("resume ran (-want +got):\n%s", d)
			}
			after := readOutcomes(t, to)
			if d := cmp.Diff([]string{"t1#0", "t2#0"}, keysOf(after)); d != "" {
				t.Errorf("outcomes after resume (-want +got):\n%s", d)
			}
			last := after[len(after)-1]
			if tc.corrupt {
				if last.Recovered || last.EpisodeID == lost.EpisodeID {
					t.Errorf("last outcome %+v: want a new episode of %s", last, lost.TaskID)
				}
				if !strings.Contains(logs.String(), "file="+st.File(lost.EpisodeID)) {
					t.Errorf("no warning names the corrupt trajectory:\n%s", logs.String())
				}
			} else if !last.Recovered || last.EpisodeID != lost.EpisodeID {
				t.Errorf("last outcome %+v: want %s recovered", last, lost.EpisodeID)
			}
		})
	}
}

// batchChildEnv makes TestBatchChild the child process of the kill -9
// tests: it runs a batch in which one episode never ends, until killed.
const batchChildEnv = "ROLLCAGE_HARNESS_BATCH_CHILD"

func TestBatchChild(t *testing.T) {
	spec := os.Getenv(batchChildEnv)
	if spec == "" {
		t.Skip("child process of the kill -9 tests")
	}
	mode, out, _ := strings.Cut(spec, ":")
	var (
		b       sandbox.Backend
		tasks   []task.Task
		hidden  fs.FS
		scripts map[string]task.Script
	)
	switch mode {
	case "fake":
		b, tasks, hidden = &fake.Backend{}, fakeTasks(4), fakeHidden
	case "docker":
		b = dockertest.Backend(t)
		tasks, hidden, scripts = demoClean(t, 3)
	}
	st, err := trajectory.OpenStore(context.Background(), trajectory.Config{Dir: filepath.Join(out, "trajectories")})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := testRunner(t, b, Limits{})
	r.cfg.Store = st
	blocked := tasks[len(tasks)-2].ID
	_, err = r.RunBatch(context.Background(), tasks, hidden, func(tk task.Task, attempt int) (Policy, error) {
		if tk.ID == blocked {
			return blockPolicy{}, nil
		}
		if s, ok := scripts[tk.ID]; ok {
			return Replay{Script: s}, nil
		}
		return Replay{Script: echoScript}, nil
	}, BatchOptions{Concurrency: 2, OutDir: out})
	t.Fatalf("the batch ended (%v); it should have been killed", err)
}

// demoClean returns the first n demo tasks and their clean scripts.
func demoClean(t testing.TB, n int) ([]task.Task, fs.FS, map[string]task.Script) {
	tasks, hidden, ss := demoSuite(t)
	clean := map[string]task.Script{}
	for _, s := range ss {
		if s.Kind == task.KindClean {
			clean[s.Task] = s
		}
	}
	return tasks[:n], hidden, clean
}

// killBatch starts the child batch, waits until want outcomes are on disk
// (the blocked episode still running), kills it with SIGKILL and returns
// the outcomes it left.
func killBatch(t *testing.T, mode, out string, want int) []Outcome {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBatchChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), batchChildEnv+"="+mode+":"+out)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Another process writes the file: poll it, bounded.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Minute)
	for {
		select {
		case err := <-exited:
			t.Fatalf("child exited early (%v):\n%s", err, stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("child did not finish %d episodes in time:\n%s", want, stderr.String())
		case <-tick.C:
		}
		b, _ := os.ReadFile(filepath.Join(out, OutcomesFile))
		if bytes.Count(b, []byte{'\n'}) >= want {
			break
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup runs
		t.Fatal(err)
	}
	<-exited
	return readOutcomes(t, out)
}

func TestBatchKill9Resume(t *testing.T) {
	out := t.TempDir()
	before := killBatch(t, "fake", out, 3)
	if diff := cmp.Diff([]string{"t1#0", "t2#0", "t4#0"}, keysOf(before)); diff != "" {
		t.Fatalf("before the kill (-want +got):\n%s", diff)
	}
	r, _ := testRunner(t, &fake.Backend{}, Limits{})
	var resume countingPolicies
	sum, err := r.RunBatch(context.Background(), fakeTasks(4), fakeHidden, resume.policyFor(echoScript), BatchOptions{Concurrency: 2, OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"t3#0"}, resume.got()); diff != "" {
		t.Errorf("resume ran (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"t1#0", "t2#0", "t3#0", "t4#0"}, keysOf(readOutcomes(t, out))); diff != "" {
		t.Errorf("outcomes after resume (-want +got):\n%s", diff)
	}
	if sum.Total.Episodes != 4 || sum.Total.CleanResolutions != 4 {
		t.Errorf("summary total %+v, want 4 clean resolutions", sum.Total)
	}
}

func TestBatchKill9ResumeInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs demo episodes in Docker")
	}
	b := dockertest.Backend(t)
	tasks, hidden, clean := demoClean(t, 3)
	sandboxtest.RequireImage(t, b, tasks[0].Image)
	out := t.TempDir()
	before := killBatch(t, "docker", out, 2)
	want := []string{tasks[0].ID + "#0", tasks[2].ID + "#0"}
	slices.Sort(want)
	if diff := cmp.Diff(want, keysOf(before)); diff != "" {
		t.Fatalf("before the kill (-want +got):\n%s", diff)
	}
	r, _ := testRunner(t, b, Limits{})
	var ran []string
	sum, err := r.RunBatch(context.Background(), tasks, hidden, func(tk task.Task, attempt int) (Policy, error) {
		ran = append(ran, tk.ID)
		return Replay{Script: clean[tk.ID]}, nil
	}, BatchOptions{Concurrency: 1, OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{tasks[1].ID}, ran); diff != "" {
		t.Errorf("resume ran (-want +got):\n%s", diff)
	}
	if sum.Total.Episodes != 3 || sum.Total.CleanResolutions != 3 {
		t.Errorf("summary total %+v, want 3 clean resolutions", sum.Total)
	}
}

func TestSummaryWrite(t *testing.T) {
	outs := []Outcome{
		{TaskID: "lru", Resolved: true, Reward: 1, CleanResolution: true, JudgeCalls: 1},
		{TaskID: "lru", Resolved: true, Reward: 1, Label: LabelUnconfirmed, UnconfirmedResolution: true, Unconfirmed: 1},
		{TaskID: "lru", Resolved: true, Reward: 1, Hacked: true, HackedResolution: true, Blocked: 2, JudgeCalls: 3},
		{TaskID: "lru", FailureClass: FailureAgent, Reason: ReasonMaxSteps},
		{TaskID: "csvquote", Hacked: true, Blocked: 1, FailureClass: FailureAgent},
		{TaskID: "csvquote", FailureClass: FailureInfrastructure},
		{TaskID: "csvquote", FailureClass: FailureGrading},
	}
	var buf bytes.Buffer
	if err := Summarize(outs).Write(&buf); err != nil {
		t.Fatal(err)
	}
	want := golden.Read(t, filepath.Join("testdata", "summary.golden"), buf.Bytes(), "go test -run TestSummaryWrite")
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("summary table (-want +got):\n%s", diff)
	}
}
