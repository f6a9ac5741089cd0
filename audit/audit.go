package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"

	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/judge"
	"github.com/rollcage/rollcage/rules"
)

// BatchGCPercent is the GOGC `rollcage audit` runs with when GOGC is not
// set. An audit allocates 20–50 KB per replayed call and keeps little of it;
// collecting a quarter as often buys 20–50% more replay throughput
// (BenchmarkAudit) for a heap that may grow to five times its live size.
const BatchGCPercent = 400

// BatchMemoryLimit is the soft memory limit (debug.SetMemoryLimit)
// `rollcage audit` runs with when GOMEMLIMIT is not set: the heap
// BatchGCPercent lets grow is collected before it passes this, so that
// the process stays within 512 MiB on any input (Batch bounds what the
// reading holds, TrimSteps what the report does).
const BatchMemoryLimit = 320 << 20

// Config configures an Auditor. Every field but Rules has a useful zero
// value.
type Config struct {
	// Rules is the compiled rules engine. Required.
	Rules *rules.Engine
	// Judge confirms or clears flagged calls. Nil audits with rules only:
	// certain flags are then hacks, and episodes with suspicious flags
	// only are unconfirmed.
	Judge judge.Judge
	// Tasks is task context by task id (LoadTasks); it fills in what an
	// episode's own metadata lacks.
	Tasks map[string]Task
	// Results says which episodes were resolved (LoadResults), by episode
	// id, then task id, for data that does not say so itself.
	Results map[string]bool
	// HistoryForJudge is how many earlier steps the judge is shown. Zero: 12.
	HistoryForJudge int
	// Concurrency is how many episodes are replayed at once. Zero: GOMAXPROCS.
	Concurrency int
	// TrimSteps keeps of a step no flag was raised on only its place in
	// the report (Step, Index, Tool), not its call, original form or
	// output: the text report and a labels score need no more, JSON and
	// HTML reports do. The report's memory then grows with the flagged
	// steps, not with the input's text (about a fifth of the input when
	// kept).
	TrimSteps bool
	Logger    *slog.Logger
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Rules == nil {
		return errors.New("audit: Config.Rules is required: compile a rules engine with rules.New")
	}
	if c.HistoryForJudge < 0 || c.Concurrency < 0 {
		return errors.New("audit: HistoryForJudge and Concurrency must not be negative; use 0 for the defaults")
	}
	if c.HistoryForJudge > rules.MaxHistory {
		return fmt.Errorf("audit: HistoryForJudge %d exceeds the %d calls an episode's history keeps (rules.MaxHistory): use at most %d", c.HistoryForJudge, rules.MaxHistory, rules.MaxHistory)
	}
	return nil
}

// Auditor replays episodes through the rules and the judge.
type Auditor struct {
	cfg Config
	log *slog.Logger
}

// New returns an Auditor.
func New(cfg Config) (*Auditor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.HistoryForJudge == 0 {
		cfg.HistoryForJudge = 12
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = runtime.GOMAXPROCS(0)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Auditor{cfg: cfg, log: log}, nil
}

// Audit replays every episode and summarizes. skipped are the files the
// reader could not use; they are carried into the report. Only a
// cancelled ctx is an error.
func (a *Auditor) Audit(ctx context.Context, eps []Trace, skipped []FileError) (*Report, error) {
	reps := make([]EpisodeReport, len(eps))
	// the longest episodes first, so that the last one to finish is short
	order := make([]int, len(eps))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return len(eps[order[i]].Steps) > len(eps[order[j]].Steps) })
	err := a.replay(ctx, func(ctx context.Context, jobs chan<- job) error {
		for _, i := range order {
			select {
			case jobs <- job{ep: eps[i], out: &reps[i]}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a.report(reps, slices.Clone(skipped)), nil
}

// AuditBatch replays the episodes of b's files as they are read and
// summarizes, in the files' order, with the files b could not read as
// skipped. Reading and replaying overlap, and only the episodes being
// replayed and the few read ahead are held in memory (Batch). Only a
// cancelled ctx is an error.
func (a *Auditor) AuditBatch(ctx context.Context, b *Batch) (*Report, error) {
	defer b.Stop()
	reps := make([][]*EpisodeReport, len(b.units))
	errs := make([][]FileError, len(b.units))
	err := a.replay(ctx, func(ctx context.Context, jobs chan<- job) error {
		for {
			var r result
			var ok bool
			select {
			case r, ok = <-b.results:
			case <-ctx.Done():
				return ctx.Err()
			}
			if !ok {
				return nil
			}
			errs[r.unit] = append(errs[r.unit], r.errs...)
			if r.ep == nil {
				continue
			}
			out := new(EpisodeReport)
			reps[r.unit] = append(reps[r.unit], out)
			select {
			case jobs <- job{ep: *r.ep, out: out, done: r.release}:
			case <-ctx.Done():
				r.release()
				return ctx.Err()
			}
		}
	})
	if err != nil {
		return nil, err
	}
	var all []EpisodeReport
	for _, rs := range reps {
		for _, r := range rs {
			all = append(all, *r)
		}
	}
	return a.report(all, slices.Concat(errs...)), nil
}

// job is one episode to replay and where its report goes.
type job struct {
	ep   Trace
	out  *EpisodeReport
	done func() // when the episode is replayed (nil: nothing to do)
}

// replay runs feed, which sends the episodes to replay, and replays them
// on Concurrency workers.
func (a *Auditor) replay(ctx context.Context, feed func(context.Context, chan<- job) error) error {
	// a fixed set of workers rather than a goroutine per episode: rule
	// evaluation recurses deeply, and a fresh goroutine grows (copies) its
	// stack again for every episode
	jobs := make(chan job)
	g, gctx := errgroup.WithContext(ctx)
	for range a.cfg.Concurrency {
		g.Go(func() error {
			for j := range jobs {
				r, err := a.Episode(gctx, j.ep)
				if j.done != nil {
					j.done()
				}
				if err != nil {
					return err
				}
				*j.out = r
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(jobs)
		return feed(gctx, jobs)
	})
	if err := g.Wait(); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// report summarizes the episodes' reports.
func (a *Auditor) report(reps []EpisodeReport, skipped []FileError) *Report {
	if reps == nil {
		reps = []EpisodeReport{}
	}
	if skipped == nil {
		skipped = []FileError{}
	}
	rep := &Report{Episodes: reps, Skipped: skipped, Judge: a.cfg.Judge != nil}
	rep.summarize()
	return rep
}
