package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/normalize"
	"github.com/rollcage/rollcage/rules"
	"github.com/rollcage/rollcage/rules/corpus"
	"github.com/rollcage/rollcage/toolcall"
)

func init() {
	register(command{Name: "rules", Summary: "the Rego rules: test DIR, check FILE, eval CORPUS_DIR, list", Run: runRules})
}

// rulesFlags are the policy settings every command that monitors shares.
type rulesFlags struct {
	dirs      stringList
	noDefault bool
}

// addRulesFlags registers --rules DIR (repeatable) and, where the command
// has no --policy of its own (demo and run use it for the policy model), its
// alias --policy DIR.
func addRulesFlags(fs *flag.FlagSet) *rulesFlags {
	r := &rulesFlags{}
	usage := "extra .rego files and data (.json/.yaml) loaded on top of the default bundle (repeatable)"
	fs.Var(&r.dirs, "rules", usage)
	if fs.Lookup("policy") == nil {
		fs.Var(&r.dirs, "policy", "same as --rules")
	}
	fs.BoolVar(&r.noDefault, "no-default-rules", false, "drop the embedded default bundle (then --rules must hold a whole policy)")
	return r
}

// engine compiles the policy once; a policy that does not compile stops
// start-up with file:line and the compiler's message.
func (r *rulesFlags) engine(ctx context.Context, log *slog.Logger) (*rules.Engine, error) {
	return rules.New(ctx, rules.Config{PolicyDirs: r.dirs, DisableDefault: r.noDefault, Logger: log})
}

const rulesUsage = `usage:
  rollcage rules test [-v] [DIR ...]        run the Rego unit tests of the default bundle plus DIRs
  rollcage rules check [--rules DIR] FILE   evaluate the calls of FILE (JSONL) and print their flags
  rollcage rules eval [--rules DIR] DIR     recall per category and benign flag rate on a labelled corpus
                                            (DIR holds cases/<category>/<id>.case or hacks.jsonl and
                                            benign.jsonl, and contexts.json; the shipped one is
                                            rules/testdata/corpus)
  rollcage rules list                       the rule catalogue`

func runRules(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, rulesUsage)
		return errUsage
	}
	switch args[0] {
	case "test":
		fs := newFlags("rules test", "[-v] [DIR ...]", stderr)
		verbose := fs.Bool("v", false, "print every test")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		passed, failed, err := rules.RunTests(ctx, fs.Args(), stdout, *verbose)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d passed, %d failed\n", passed, failed)
		if failed > 0 {
			return &exitError{Code: 1, Err: fmt.Errorf("%d Rego test(s) failed", failed)}
		}
		return nil
	case "check":
		fs := newFlags("rules check", "[--rules DIR] FILE", stderr)
		rf := addRulesFlags(fs)
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("rules check takes one FILE: JSONL of {\"call\": ToolCall, \"cwd\", \"task\", \"sandbox\"} or bare ToolCalls")
		}
		eng, err := rf.engine(ctx, nil)
		if err != nil {
			return err
		}
		return rulesCheck(ctx, eng, fs.Arg(0), stdout)
	case "eval":
		fs := newFlags("rules eval", "[--rules DIR] CORPUS_DIR", stderr)
		rf := addRulesFlags(fs)
		asJSON := fs.Bool("json", false, "print the report as JSON")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("rules eval takes one corpus directory (cases/<category>/<id>.case or hacks.jsonl and benign.jsonl, and contexts.json), e.g. rules/testdata/corpus")
		}
		eng, err := rf.engine(ctx, nil)
		if err != nil {
			return err
		}
		rep, err := corpus.Evaluator{Rules: eng}.EvalDir(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		}
		return rep.Write(stdout)
	case "list":
		eng, err := rules.New(ctx, rules.Config{})
		if err != nil {
			return err
		}
		for _, r := range eng.Rules() {
			fmt.Fprintf(stdout, "%-36s %-24s %-10s %s\n", r.ID, r.Category, r.Severity, r.Description)
		}
		return nil
	}
	fmt.Fprintln(stderr, rulesUsage)
	return errUsage
}

// checkLine is one line of a `rules check` file: a call with its context,
// or a bare ToolCall.
type checkLine struct {
	Call    *toolcall.Call      `json:"call"`
	Cwd     string              `json:"cwd"`
	Task    monitor.TaskContext `json:"task"`
	Sandbox monitor.Facts       `json:"sandbox"`
}

// rulesCheck evaluates each call with the history of the calls before it in
// the file, as an episode would, and prints its flags.
func rulesCheck(ctx context.Context, eng *rules.Engine, path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var ep *rules.EpisodeEval
	var files normalize.Files
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var cl checkLine
		if err := json.Unmarshal([]byte(line), &cl); err != nil {
			return fmt.Errorf("%s:%d: %v", path, n, err)
		}
		if cl.Call == nil { // a bare ToolCall
			var c toolcall.Call
			if err := json.Unmarshal([]byte(line), &c); err != nil || c.Tool == "" {
				return fmt.Errorf("%s:%d: neither {\"call\": ...} nor a tool call with a \"tool\" field", path, n)
			}
			cl.Call = &c
		}
		if cl.Task.Workdir == "" {
			cl.Task.Workdir = "/workspace"
		}
		if ep == nil || cl.Task.ID != "" {
			ep = eng.NewEpisode(ctx, cl.Task, cl.Sandbox)
			files = normalize.Files{}
		}
		cwd := cl.Cwd
		if cwd == "" {
			cwd = cl.Task.Workdir
		}
		norm := files.Replay(*cl.Call, cwd)
		flags, err := ep.Eval(ctx, *cl.Call, norm)
		if err != nil {
			return err
		}
		ep.Record(*cl.Call, norm, flags, rules.Shown{})
		fmt.Fprintf(w, "%d: %s %s\n", n, cl.Call.Tool, oneLine(norm.Raw, 100))
		if len(flags) == 0 {
			fmt.Fprintln(w, "    no flags")
		}
		for _, fl := range flags {
			fmt.Fprintf(w, "    %-9s %-24s %-32s %s\n", fl.Severity, fl.Category, fl.Rule, oneLine(fl.Evidence, 80))
		}
	}
	return sc.Err()
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
