package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/trajectory"
)

func init() {
	register(command{Name: "run", Summary: "run a batch of episodes: a model (OpenAI-compatible URL) or replayed scripts on a task file", Run: runBatch})
}

func runBatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "--tasks FILE --policy URL|replay:DIR [--model M] [--concurrency N] [--attempts K] [--out DIR] [--no-seal]", stderr)
	tasksFile := fs.String("tasks", "", "task file (JSONL; SWE-bench-family instances too), or a Harbor task or dataset directory; hidden test paths are relative to it")
	var loadOpts task.LoadOptions
	instanceFlags(fs, &loadOpts)
	policy := fs.String("policy", "", "OpenAI-compatible API of the policy model (http://127.0.0.1:8000/v1), or replay:DIR of scripts (*.json)")
	model := fs.String("model", "", "policy model name (required with a URL policy)")
	apiKey := fs.String("api-key", os.Getenv("ROLLCAGE_POLICY_API_KEY"), "policy API key (env ROLLCAGE_POLICY_API_KEY)")
	ef := addEnvFlags(fs, harness.DefaultConcurrency, filepath.Join("out", "run"), "output directory: outcomes.jsonl and trajectories/; an existing one is resumed")
	attempts := fs.Int("attempts", 1, "episodes per task")
	branchAt := fs.Int("branch-at", 0, "tree rollouts (with --branches): fork each episode at the first turn after this many tool calls")
	branches := fs.Int("branches", 0, "tree rollouts: leaves per episode: the episode goes on as one and branches-1 forks of it as the others (2 or more; 0: no tree)")
	temp := fs.Float64("temperature", 1.0, "sampling temperature")
	maxTurn := fs.Int("max-completion-tokens", 0, "cap on one model turn (0: server default)")
	logprobs := fs.Bool("logprobs", true, "ask for and record completion logprobs")
	topLogprobs := fs.Int("top-logprobs", 0, "alternatives per token position (0-20)")
	tokenIDs := addTokenIDsFlag(fs)
	budget := fs.Int("context-budget", harness.DefaultContextBudget, "tokens of conversation before compaction into a new segment (-1: never)")
	prompts := fs.String("prompts", "", "directory with system.tmpl, task.tmpl, compact.tmpl, resume.tmpl overriding the built-in prompts")
	maxSteps := fs.Int("max-steps", harness.DefaultMaxSteps, "tool calls per episode")
	wall := fs.Duration("wall-time", harness.DefaultWallTime, "wall time of the agent's part of an episode")
	maxTokens := fs.Int("max-tokens", 0, "completion tokens per episode (0: no limit)")
	network := fs.String("network", sandbox.NetworkNone, "sandbox network: none or proxy")
	var routes stringList
	sandboxUser := fs.String("sandbox-user", "", "root: the policy is root inside a user namespace (Docker on an engine with --userns-remap only; see docs/security-model.md); empty: uid 1000")
	fs.Var(&routes, "model-route", "a URL of the trainer's model adapter (http://HOST:PORT/PATH or https://HOST:PORT) the agent in the sandbox may reach through the egress proxy; turns the proxy on (repeatable)")
	disk := addDiskFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := ef.check(); err != nil {
		return err
	}
	if err := harness.CheckModelRoutes(routes); err != nil {
		return fmt.Errorf("--model-route: %w", err)
	}
	if err := harness.CheckSandboxUser(*sandboxUser); err != nil {
		return fmt.Errorf("--sandbox-user: %w", err)
	}
	if *tasksFile == "" {
		return errors.New("--tasks is required: a JSONL task file (see the README's task format)")
	}
	if *policy == "" {
		return errors.New("--policy is required: the policy model's API (http://HOST:PORT/v1) or replay:DIR")
	}
	var tree harness.Tree
	if *branches != 0 || *branchAt != 0 {
		tree = harness.Tree{At: *branchAt, Branches: *branches}
		if err := tree.Validate(); err != nil {
			return fmt.Errorf("--branch-at %d --branches %d: %w", *branchAt, *branches, err)
		}
		if *network != sandbox.NetworkNone {
			return fmt.Errorf("--branches with --network %s: episodes in proxy mode cannot fork yet: use --network none", *network)
		}
		if len(routes) > 0 {
			return errors.New("--branches with --model-route: episodes in proxy mode cannot fork yet: drop one of them")
		}
	}
	tasks, hidden, err := loadTasks(ctx, *tasksFile, loadOpts, stderr)
	if err != nil {
		return err
	}
	policyFor, label, err := buildPolicy(*policy, policyOptions{
		model: *model, apiKey: *apiKey, temp: *temp, maxTurn: *maxTurn, logprobs: *logprobs, top: *topLogprobs,
		tokenIDs: *tokenIDs, budget: *budget, prompts: *prompts,
	})
	if err != nil {
		return err
	}
	opts := ef.options(filepath.Join(*ef.out, "trajectories"), stderr)
	opts.network, opts.routes, opts.disk, opts.user = *network, routes, int64(*disk), *sandboxUser
	opts.limits = harness.Limits{MaxSteps: *maxSteps, WallTime: *wall, MaxTokens: *maxTokens}
	env, err := newEnv(ctx, opts)
	if err != nil {
		return err
	}
	defer env.close()
	sum, err := env.runner.RunBatch(ctx, tasks, hidden, policyFor, harness.BatchOptions{
		Concurrency: *ef.conc, Attempts: *attempts, OutDir: *ef.out, Progress: stderr, Model: label, Tree: tree,
	})
	if werr := sum.Write(stdout); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\noutcomes in %s; trajectories in %s (rollcage export --format messages --out FILE %s)\n",
		filepath.Join(*ef.out, harness.OutcomesFile), env.store.Dir(), *ef.out)
	return nil
}

type policyOptions struct {
	model, apiKey string
	temp          float64
	maxTurn, top  int
	logprobs      bool
	tokenIDs      string
	budget        int
	prompts       string
}

// buildPolicy turns --policy into a PolicyFor and the model label recorded.
func buildPolicy(spec string, o policyOptions) (harness.PolicyFor, string, error) {
	if dir, ok := strings.CutPrefix(spec, "replay:"); ok {
		scripts, err := task.LoadScripts(os.DirFS(dir), ".")
		if err != nil {
			return nil, "", fmt.Errorf("--policy %s: %w", spec, err)
		}
		byTask := map[string][]task.Script{}
		for _, s := range scripts {
			byTask[s.Task] = append(byTask[s.Task], s)
		}
		return func(t task.Task, attempt int) (harness.Policy, error) {
			ss := byTask[t.ID]
			if len(ss) == 0 {
				return nil, fmt.Errorf("no script for task %q in %s: add one or drop the task", t.ID, dir)
			}
			return harness.Replay{Script: ss[attempt%len(ss)]}, nil // attempt k replays the k-th script
		}, "replay", nil
	}
	if !strings.HasPrefix(spec, "http://") && !strings.HasPrefix(spec, "https://") {
		return nil, "", fmt.Errorf("--policy %q: give an http(s) URL of an OpenAI-compatible API or replay:DIR", spec)
	}
	if o.model == "" {
		return nil, "", errors.New("--model is required with a URL policy: name a model the server serves")
	}
	cfg := harness.OpenAIConfig{BaseURL: spec, Model: o.model, APIKey: o.apiKey, Temperature: float32(o.temp),
		MaxCompletionTokens: o.maxTurn, Logprobs: o.logprobs, TopLogprobs: o.top, ContextBudget: o.budget,
		PromptDir: o.prompts, RequestTimeout: 10 * time.Minute, TokenIDs: o.tokenIDs}
	p, err := harness.NewOpenAI(cfg)
	if err != nil {
		return nil, "", err
	}
	return func(task.Task, int) (harness.Policy, error) { return p, nil }, o.model, nil
}

// addTokenIDsFlag is --token-ids of run and serve: how the model server is
// asked for token ids and logprobs.
func addTokenIDsFlag(fs *flag.FlagSet) *string {
	return fs.String("token-ids", envOr("ROLLCAGE_TOKEN_IDS", trajectory.TokensVLLM),
		"ask the model server for prompt/completion token ids and logprobs, and record them: vllm (return_token_ids; a server that refuses the fields is asked again without them), sglang (return_logprob) or off (env ROLLCAGE_TOKEN_IDS)")
}
