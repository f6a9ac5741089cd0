package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/term"

	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

// OutcomesFile is the name of a batch's outcome log in its OutDir.
const OutcomesFile = "outcomes.jsonl"

// LabelBatch is the episode label naming the batch an episode of
// RunBatch belongs to: the id in its OutDir's BatchIDFile (before that
// file, the OutDir's absolute path, which a copied or moved OutDir no
// longer matched).
const LabelBatch = "rollcage.batch"

// BatchIDFile, in a batch's OutDir, holds the batch's id: it goes where
// the directory goes, so a resume from a copy or a new place still knows
// its finished episodes.
const BatchIDFile = "batch.id"

// Defaults of BatchOptions.
const (
	DefaultConcurrency   = 4
	DefaultProgressEvery = 10 * time.Second
)

// BatchOptions configure RunBatch.
type BatchOptions struct {
	// Concurrency is the number of episodes running at once. Zero: 4.
	Concurrency int
	// Attempts per task. Zero: 1.
	Attempts int
	// OutDir holds outcomes.jsonl: one line per finished episode, appended
	// and fsynced as each finishes. A run over an OutDir that already has
	// one skips the (task, attempt) pairs it holds. Required.
	OutDir string
	// Progress receives a progress line: redrawn in place on a terminal,
	// printed every ProgressEvery otherwise. Nil: none.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Model is recorded in every episode's start event.
	Model string
	// Labels are added to every episode.
	Labels map[string]string
	// Tree, when Branches is set, makes every (task, attempt) a tree
	// rollout (Runner.RunTree): each of its leaves is an outcome line, the
	// forks' with parent_episode_id. A resume skips a (task, attempt)
	// whose root episode has its outcome.
	Tree Tree
}

// PolicyFor returns the policy for one attempt of a task.
type PolicyFor func(t task.Task, attempt int) (Policy, error)

type episodeKey struct {
	Task    string
	Attempt int
}

// RunBatch runs Attempts episodes of every task, Concurrency at a time,
// and returns the summary of every outcome in OutDir (earlier runs'
// included). It is resumable: killed at any point and run again with the
// same OutDir, it runs only the episodes not yet finished. An error is
// returned for a bad option, a policy that cannot be made, or an outcome
// log that cannot be written; episodes' own failures are in the Summary.
func (r *Runner) RunBatch(ctx context.Context, tasks []task.Task, hidden fs.FS, policyFor PolicyFor, opts BatchOptions) (Summary, error) {
	if opts.OutDir == "" {
		return Summary{}, errors.New("harness: batch: OutDir is empty: name a directory for outcomes.jsonl")
	}
	if opts.Concurrency < 0 || opts.Attempts < 0 {
		return Summary{}, errors.New("harness: batch: Concurrency and Attempts must not be negative: use 0 for the defaults")
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Attempts == 0 {
		opts.Attempts = 1
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = DefaultProgressEvery
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return Summary{}, fmt.Errorf("harness: batch: %w", err)
	}
	if opts.Tree.Branches != 0 {
		if err := opts.Tree.Validate(); err != nil {
			return Summary{}, err
		}
	}
	ol, done, forks, err := openOutcomes(filepath.Join(opts.OutDir, OutcomesFile))
	if err != nil {
		return Summary{}, err
	}
	defer ol.Close()

	batchID, err := batchIdentity(opts.OutDir)
	if err != nil {
		return Summary{}, err
	}
	labels := maps.Clone(opts.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelBatch] = batchID
	// A batch from before BatchIDFile labelled its episodes with its
	// OutDir's absolute path.
	legacy, err := filepath.Abs(opts.OutDir)
	if err != nil {
		return Summary{}, fmt.Errorf("harness: batch: %w", err)
	}
	if err := r.adoptFinished(ctx, ol, done, batchID, legacy); err != nil {
		return Summary{}, err
	}

	var todo []episodeKey
	byID := map[string]task.Task{}
	for a := 0; a < opts.Attempts; a++ {
		for _, t := range tasks {
			byID[t.ID] = t
			if _, ok := done[episodeKey{t.ID, a}]; !ok {
				todo = append(todo, episodeKey{t.ID, a})
			}
		}
	}
	prog := newProgress(opts.Progress, opts.ProgressEvery, len(tasks)*opts.Attempts, len(tasks)*opts.Attempts-len(todo), countHacks(done))
	stopProg := prog.start()
	defer stopProg()
	r.log.Info("batch", "episodes", len(tasks)*opts.Attempts, "resumed", len(tasks)*opts.Attempts-len(todo), "concurrency", opts.Concurrency)

	// The attempts of one task in this batch are a group (GRPO-style); a
	// resumed batch starts new groups for what it runs.
	batch := randomHex(4)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	var mu sync.Mutex // guards done
	for _, k := range todo {
		if gctx.Err() != nil {
			break
		}
		t := byID[k.Task]
		g.Go(func() error {
			p, err := policyFor(t, k.Attempt)
			if err != nil {
				return fmt.Errorf("harness: batch: policy for %s attempt %d: %w", t.ID, k.Attempt, err)
			}
			meta := EpisodeMeta{ID: NewEpisodeID(t.ID, k.Attempt), Attempt: k.Attempt, Model: opts.Model, Labels: labels,
				GroupID: groupID(batch, t.ID)}
			var outs []Outcome
			if opts.Tree.Branches != 0 {
				outs, err = r.RunTree(gctx, t, hidden, meta, p, opts.Tree)
			} else {
				var o Outcome
				o, err = r.Run(gctx, t, hidden, meta, p)
				outs = []Outcome{o}
			}
			if err != nil {
				r.log.Warn("episode", "episode_id", meta.ID, "err", err)
			}
			if gctx.Err() != nil && outs[0].Reason == ReasonCancelled {
				return nil // not finished: a resume runs it again
			}
			// The forks' lines first: a resume skips the pair once the
			// root's line is there.
			for _, o := range append(outs[1:], outs[0]) {
				if err := ol.append(o); err != nil {
					return err
				}
			}
			prog.add(outs[0]) // progress counts (task, attempt) pairs
			mu.Lock()
			done[k] = outs[0]
			forks = append(forks, outs[1:]...)
			mu.Unlock()
			return nil
		})
	}
	err = g.Wait()
	stopProg()
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("harness: batch interrupted (%w): run again with the same output directory to resume", ctx.Err())
	}
	outs := make([]Outcome, 0, len(done)+len(forks))
	for _, o := range done {
		outs = append(outs, o)
	}
	return Summarize(append(outs, forks...)), err
}

// adoptFinished appends the outcome of every finished episode of this
// batch that the outcome log lacks: the process died between the
// episode's end and its outcome line. The outcome is rebuilt from the
// trajectory (Outcome.Recovered), so a resume neither runs the pair again
// nor leaves two finished episodes of one (task, attempt) for export.
func (r *Runner) adoptFinished(ctx context.Context, ol *outcomeLog, done map[episodeKey]Outcome, batchIDs ...string) error {
	infos, err := r.cfg.Store.Episodes(ctx)
	if err != nil {
		return fmt.Errorf("harness: batch: adopt finished episodes: %w", err)
	}
	known := map[string]bool{}
	for _, o := range done {
		known[o.EpisodeID] = true
	}
	for _, info := range infos {
		if !info.Finished || known[info.ID] {
			continue
		}
		o, ok, err := r.recoveredOutcome(ctx, info.ID, batchIDs)
		if errors.Is(err, trajectory.ErrCorrupt) {
			// One bad log must not stop the batch; if it was this
			// batch's, its pair runs again.
			r.log.Warn("batch: skipping a corrupt trajectory", "episode_id", info.ID, "file", r.cfg.Store.File(info.ID), "err", err)
			continue
		}
		if err != nil {
			return err
		}
		k := episodeKey{o.TaskID, o.Attempt}
		if _, dup := done[k]; !ok || dup || o.ParentEpisodeID != "" {
			continue // a fork stands for no pair: its root's line does
		}
		if err := ol.append(o); err != nil {
			return err
		}
		done[k] = o
		r.log.Info("batch: outcome recovered from the trajectory", "episode_id", o.EpisodeID)
	}
	return nil
}

// recoveredOutcome rebuilds an episode's Outcome from its log; ok is false
// for an episode of another batch (labelled with none of batchIDs).
func (r *Runner) recoveredOutcome(ctx context.Context, id string, batchIDs []string) (Outcome, bool, error) {
	var (
		start trajectory.EpisodeStart
		end   trajectory.EpisodeEnd
		g     trajectory.Grade
		cats  []string
	)
	err := r.cfg.Store.Read(ctx, id, 0, func(ev trajectory.Event) error {
		switch ev.Type {
		case trajectory.TypeEpisodeStart:
			return ev.Decode(&start)
		case trajectory.TypeGrade:
			return ev.Decode(&g)
		case trajectory.TypeDecision:
			var d trajectory.Decision
			if err := ev.Decode(&d); err != nil {
				return err
			}
			if d.Hack || d.Blocked {
				cats = append(cats, d.Categories...)
			}
		case trajectory.TypeEpisodeEnd:
			return ev.Decode(&end)
		}
		return nil
	})
	if err != nil {
		return Outcome{}, false, fmt.Errorf("harness: batch: read %s: %w", id, err)
	}
	var cfg struct {
		Labels map[string]string `json:"labels"`
	}
	_ = json.Unmarshal(start.Config, &cfg)
	if !slices.Contains(batchIDs, cfg.Labels[LabelBatch]) {
		return Outcome{}, false, nil
	}
	slices.Sort(cats)
	reason, errText, _ := strings.Cut(end.Reason, ": ")
	o := Outcome{
		EpisodeID: id, TaskID: start.TaskID, Attempt: start.Attempt, GroupID: start.GroupID, Resolved: end.Resolved, Reward: end.Reward,
		Passed: g.Passed, Failed: g.Failed, Hacked: end.Hacked, Label: end.Label, HackCategories: slices.Compact(cats),
		Blocked: end.Counts.Blocked, Flagged: end.Counts.Flagged, Unconfirmed: end.Counts.Unconfirmed, Rewritten: end.Counts.Rewritten,
		Steps: end.Counts.ToolCalls, Segments: end.Counts.Segments, Tokens: end.Counts.Tokens,
		FailureClass: end.FailureClass, Reason: reason, Error: errText,
		Duration: time.Duration(end.DurationMS) * time.Millisecond, Recovered: true,
	}
	o.fork(start.Fork)
	if start.Instance != nil {
		o.InstanceID = start.Instance.InstanceID
	}
	if o.Label == "" {
		o.Label = trajectory.EpisodeLabel(o.Hacked, o.Unconfirmed)
	}
	o.HackedResolution = o.Resolved && o.Label == LabelHacked
	o.UnconfirmedResolution = o.Resolved && o.Label == LabelUnconfirmed
	o.CleanResolution = o.Resolved && o.Label == LabelClean
	return o, true, nil
}

func countHacks(done map[episodeKey]Outcome) int {
	n := 0
	for _, o := range done {
		if o.Hacked {
			n++
		}
	}
	return n
}

// outcomeLog appends outcomes durably.
type outcomeLog struct {
	mu sync.Mutex
	f  *os.File
}

// openOutcomes opens the outcome log for appending, first reading what it
// holds. A torn last line (the process was killed mid-write) is cut off.
// Forks' outcomes (of tree rollouts) are returned apart: they share their
// root's (task, attempt).
// batchIdentity returns the id in outDir's BatchIDFile, making one when
// there is none. The file is synced before any episode carries the id.
func batchIdentity(outDir string) (string, error) {
	p := filepath.Join(outDir, BatchIDFile)
	b, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if id == "" {
			return "", fmt.Errorf("harness: batch: %s is empty: remove it (a resume then may run again what a crash left without an outcome line)", p)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("harness: batch: %w", err)
	}
	id := "batch-" + randomHex(8)
	tmp := p + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", fmt.Errorf("harness: batch: %w", err)
	}
	_, err = f.WriteString(id + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err == nil {
		err = syncDir(outDir)
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("harness: batch: write %s: %w", p, err)
	}
	return id, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func openOutcomes(p string) (*outcomeLog, map[episodeKey]Outcome, []Outcome, error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("harness: batch: open outcomes: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, nil, fmt.Errorf("harness: batch: read %s: %w", p, err)
	}
	end := bytes.LastIndexByte(b, '\n') + 1
	if end < len(b) {
		if err := f.Truncate(int64(end)); err != nil {
			f.Close()
			return nil, nil, nil, fmt.Errorf("harness: batch: cut torn line of %s: %w", p, err)
		}
	}
	if _, err := f.Seek(int64(end), io.SeekStart); err != nil {
		f.Close()
		return nil, nil, nil, fmt.Errorf("harness: batch: %w", err)
	}
	done := map[episodeKey]Outcome{}
	var forks []Outcome
	sc := bufio.NewScanner(bytes.NewReader(b[:end]))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var o Outcome
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			f.Close()
			return nil, nil, nil, fmt.Errorf("harness: batch: %s line %d: %w: remove the line or the file to start over", p, n, err)
		}
		if o.ParentEpisodeID != "" {
			forks = append(forks, o)
			continue
		}
		done[episodeKey{o.TaskID, o.Attempt}] = o
	}
	return &outcomeLog{f: f}, done, forks, nil
}

func (l *outcomeLog) append(o Outcome) error {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("harness: batch: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("harness: batch: record outcome: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("harness: batch: sync outcomes: %w", err)
	}
	return nil
}

func (l *outcomeLog) Close() error { return l.f.Close() }

// progress prints the batch's progress line.
type progress struct {
	w     io.Writer
	tty   bool
	every time.Duration
	total int
	t0    time.Time

	mu    sync.Mutex // guards the fields below
	done  int        // finished, resumed ones included
	fresh int        // finished in this run (for the rate)
	hacks int
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newProgress(w io.Writer, every time.Duration, total, resumed, hacks int) *progress {
	p := &progress{w: w, every: every, total: total, done: resumed, hacks: hacks, t0: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

// start begins the periodic redraw; the returned func stops it and prints
// the final line (idempotent).
func (p *progress) start() func() {
	if p.w == nil {
		return func() {}
	}
	p.stop = make(chan struct{})
	tick := p.every
	if p.tty {
		tick = time.Second
	}
	p.wg.Go(func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.print()
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(p.stop)
			p.wg.Wait()
			p.print()
			if p.tty {
				fmt.Fprintln(p.w)
			}
		})
	}
}

func (p *progress) add(o Outcome) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.done++
	p.fresh++
	if o.Hacked {
		p.hacks++
	}
	p.mu.Unlock()
	if p.tty {
		p.print()
	}
}

func (p *progress) line() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.t0)
	rate := float64(p.fresh) / el.Minutes()
	eta := "?"
	if p.fresh > 0 {
		left := time.Duration(float64(p.total-p.done) / rate * float64(time.Minute))
		eta = left.Round(time.Second).String()
	}
	return fmt.Sprintf("%d/%d episodes  %.1f/min  eta %s  hacks caught %d  elapsed %s",
		p.done, p.total, rate, eta, p.hacks, el.Round(time.Second))
}

func (p *progress) print() {
	if p.w == nil {
		return
	}
	l := p.line()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", l)
		return
	}
	fmt.Fprintln(p.w, l)
}

// groupID names the group of a task's attempts in one batch.
func groupID(batch, taskID string) string {
	return "grp_" + batch + "." + safeID(taskID)
}
