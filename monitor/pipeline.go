package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rollcage/rollcage/judge"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/sandbox"
)

// Config configures a Pipeline. The zero value of every field but Rules is
// usable.
type Config struct {
	// Rules is the compiled rules engine. Required.
	Rules *rules.Engine
	// Judge confirms flagged calls. Nil runs rules only: FailPolicy then
	// decides every flagged call (certain → block, suspicious → allow and
	// mark unconfirmed by default).
	Judge judge.Judge
	// FailPolicy applies when the judge is absent, unreachable, slow or
	// undecided. Zero: judge.DefaultFailPolicy.
	FailPolicy judge.FailPolicy
	// AuditRate is the fraction of unflagged calls also sent to the judge,
	// to estimate what the rules miss; their verdicts are recorded, never
	// acted on. Zero: off.
	AuditRate float64
	// ExecTimeout bounds a bash call unless the call asks for less. Zero: 120s.
	ExecTimeout time.Duration
	// MaxOutput caps a call's output shown to the policy. Zero: 32 KiB.
	MaxOutput int
	// HistoryForJudge is how many earlier steps the judge is shown. Zero: 12.
	HistoryForJudge int
	Logger          *slog.Logger
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Rules == nil {
		return errors.New("monitor: Config.Rules is required")
	}
	if c.AuditRate < 0 || c.AuditRate > 1 {
		return fmt.Errorf("monitor: audit rate %v outside [0,1]", c.AuditRate)
	}
	if c.HistoryForJudge > rules.MaxHistory {
		return fmt.Errorf("monitor: HistoryForJudge %d exceeds the %d calls an episode's history keeps (rules.MaxHistory): use at most %d", c.HistoryForJudge, rules.MaxHistory, rules.MaxHistory)
	}
	return nil
}

// Pipeline holds what all episodes share: the compiled rules, the judge,
// the policy. Episodes are made with NewEpisode.
type Pipeline struct {
	cfg     Config
	log     *slog.Logger
	sampler judge.Sampler
}

// New returns a Pipeline.
func New(cfg Config) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.FailPolicy == (judge.FailPolicy{}) {
		cfg.FailPolicy = judge.DefaultFailPolicy
	}
	if cfg.ExecTimeout <= 0 {
		cfg.ExecTimeout = 120 * time.Second
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 32 << 10
	}
	if cfg.HistoryForJudge <= 0 {
		cfg.HistoryForJudge = 12
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{cfg: cfg, log: log, sampler: judge.Sampler{Rate: cfg.AuditRate}}, nil
}

// TaskContext is what the monitor and the rules know of the episode's
// task. Its JSON is input.task in the rules.
type TaskContext struct {
	ID             string   `json:"id"`
	Instruction    string   `json:"instruction,omitempty"`
	Workdir        string   `json:"workdir"`
	ProtectedPaths []string `json:"protected_paths"`
	VisibleTests   []string `json:"visible_tests"`
	BaseCommit     string   `json:"base_commit"`
	UpstreamFixRef string   `json:"upstream_fix_ref"`
	UpstreamRepo   string   `json:"upstream_repo"`
	ReferenceURLs  []string `json:"reference_urls"`
	AllowedHosts   []string `json:"allowed_hosts"`
}

// Facts are what the sandbox showed at episode start. Their JSON is
// input.sandbox in the rules.
type Facts struct {
	// NonAncestorCommits are full ids of commits in the repository that are
	// not ancestors of the base commit: the future the agent must not see.
	NonAncestorCommits []string `json:"non_ancestor_commits"`
	// NonAncestorRefs are refs (short and full names) pointing at them.
	NonAncestorRefs []string `json:"non_ancestor_refs"`
	Canaries        []string `json:"canaries"`
	Home            string   `json:"home"`
	// VisibleFiles are the visible-test files (relative to the workdir)
	// that existed at episode start: writing a new test file is not
	// changing one.
	VisibleFiles []string `json:"visible_files,omitempty"`
}

// EpisodeConfig describes one episode to the monitor.
type EpisodeConfig struct {
	ID      string
	Task    TaskContext
	Facts   Facts
	Sandbox sandbox.Sandbox
	// Secrets are protected texts (hidden tests, the upstream fix's diff)
	// whose appearance in an output is a leak.
	Secrets []Secret
	// BaseText are texts the agent may legitimately see (the repository at
	// the base commit); secret lines found in them are not leaks.
	BaseText string
	// VisibleHashes are the visible tests' hashes at episode start (path
	// relative to the workdir → hash), and HashVisible takes them again.
	// When a call's effects were partly lost, the monitor compares the two
	// instead; without HashVisible such a call is flagged (fail closed).
	VisibleHashes map[string]string
	HashVisible   func(ctx context.Context) (map[string]string, error)
	Logger        *slog.Logger
}

// Secret is protected material that must not reach the policy.
type Secret struct {
	Kind string // "hidden_test", "upstream_fix"
	Text string
	// MinLines is how many distinct lines of it must show in one output to
	// count as a leak. Zero: 2.
	MinLines int
}
