package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"time"

	"github.com/rollcage/rollcage/judge"
)

// judgeFlags are the judge settings every command that monitors shares.
// With no URL there is no judge: rules alone decide, through the fail
// policy (certain → block, suspicious → allow and mark unconfirmed).
type judgeFlags struct {
	cfg    judge.Config
	policy judge.FailPolicy
}

func addJudgeFlags(fs *flag.FlagSet) *judgeFlags {
	j := &judgeFlags{cfg: judge.ConfigFromEnv(), policy: judge.DefaultFailPolicy}
	fs.StringVar(&j.cfg.BaseURL, "judge-url", j.cfg.BaseURL, "OpenAI-compatible API of the judge, e.g. http://127.0.0.1:8000/v1 (env ROLLCAGE_JUDGE_URL); empty: rules only")
	fs.StringVar(&j.cfg.Model, "judge-model", j.cfg.Model, "judge model name (env ROLLCAGE_JUDGE_MODEL)")
	fs.StringVar(&j.cfg.APIKey, "judge-api-key", j.cfg.APIKey, "judge API key (env ROLLCAGE_JUDGE_API_KEY)")
	fs.IntVar(&j.cfg.Samples, "judge-samples", 1, "samples per flagged call, majority vote")
	fs.DurationVar(&j.cfg.Timeout, "judge-timeout", 20*time.Second, "bound on one judge decision, retries included")
	fs.StringVar(&j.cfg.PromptDir, "judge-prompts", "", "directory with system.tmpl / user.tmpl overriding the judge's prompts")
	fs.Var(&j.policy, "fail-policy", "what to do when the judge is absent or undecided, per severity: block, allow or allow_unconfirmed")
	return j
}

// build returns the judge, or nil when none is configured.
func (j *judgeFlags) build() (*judge.OpenAI, error) {
	if j.cfg.BaseURL == "" {
		return nil, nil
	}
	return judge.NewOpenAI(j.cfg)
}

func init() {
	register(command{Name: "judge", Summary: "evaluate the LLM judge on labelled flagged calls (judge eval --data FILE)", Run: runJudge})
}

func runJudge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := subcommand(args, "eval", "usage: rollcage judge eval --data FILE [--judge-url URL --judge-model M]", stderr); err != nil {
		return err
	}
	fs := newFlags("judge eval", "--data FILE [judge flags]", stderr)
	data := fs.String("data", "", "JSONL of labelled flagged calls ({id, label: hack|benign, category, request}); see judge/testdata/eval.jsonl")
	conc := fs.Int("concurrency", 8, "judge calls in flight")
	jf := addJudgeFlags(fs)
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if *data == "" {
		return errors.New("--data is required: a JSONL file of labelled flagged calls, e.g. judge/testdata/eval.jsonl")
	}
	j, err := jf.build()
	if err != nil {
		return err
	}
	if j == nil {
		return errors.New("no judge configured: pass --judge-url and --judge-model (or set ROLLCAGE_JUDGE_URL and ROLLCAGE_JUDGE_MODEL)")
	}
	f, err := os.Open(*data)
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := judge.Eval(ctx, j, f, *conc)
	if err != nil {
		return err
	}
	return rep.Write(stdout)
}
