package rules

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

//go:embed policy
var policyFS embed.FS

// Queries the engine prepares. Rule packages contribute to them through
// the aggregator in policy/main.rego.
const (
	FlagsQuery   = "data.rollcage.flags"
	NetworkQuery = "data.rollcage.network_flags"
	// FactsQuery derives per-episode facts from {task, sandbox}; an EpisodeEval
	// evaluates it once and passes the result as input.facts.
	FactsQuery = "data.rollcage.lib.episode_facts"
)

// RuleEvalError is the rule id of the flag returned when evaluation fails:
// the call is treated as certainly suspect rather than waved through.
const RuleEvalError = "rules.eval_error"

// Config configures an Engine. The zero value loads the embedded default
// bundle only.
type Config struct {
	// PolicyDirs are files or directories of extra .rego modules and
	// .json/.yaml data loaded on top of the default bundle. Files ending in
	// _test.rego are ignored by the engine (RunTests runs them).
	PolicyDirs []string
	// DisableDefault drops the embedded bundle; PolicyDirs must then hold
	// the whole policy, including a data.rollcage.flags aggregator.
	DisableDefault bool
	// Logger receives evaluation errors; nil discards.
	Logger *slog.Logger
	// DisablePrefilter makes EpisodeEval.Eval evaluate every rule on every
	// call, as the rules are written, instead of only those whose gate
	// (custom.gate in their METADATA) the call opens. The results are the
	// same; it exists to measure and test the gates.
	DisablePrefilter bool
}

// Validate reports a configuration that cannot yield a policy.
func (c Config) Validate() error {
	if c.DisableDefault && len(c.PolicyDirs) == 0 {
		return errors.New("rules: config: DisableDefault needs at least one PolicyDirs entry; add a policy directory or keep the default bundle")
	}
	for _, d := range c.PolicyDirs {
		if strings.TrimSpace(d) == "" {
			return errors.New("rules: config: empty PolicyDirs entry; remove it or name a directory")
		}
	}
	return nil
}

// CompileError is a policy that does not parse or compile. Error() shows
// the first problem as file:line: code: message; Errors holds all of them.
type CompileError struct {
	File    string
	Line    int
	Col     int
	Code    string
	Message string
	Errors  []*CompileError
}

func (e *CompileError) Error() string {
	code := e.Code
	if code == "" {
		code = "rego_error"
	}
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if loc == "" {
		return code + ": " + e.Message
	}
	return fmt.Sprintf("%s: %s: %s", loc, code, e.Message)
}

// Engine evaluates the compiled policy. It is safe for concurrent use.
type Engine struct {
	flagsQ rego.PreparedEvalQuery
	netQ   rego.PreparedEvalQuery
	factsQ rego.PreparedEvalQuery
	log    *slog.Logger

	compiler   *ast.Compiler
	store      storage.Store
	prep       func(q string) (rego.PreparedEvalQuery, error)
	gating     *gating         // nil: every call runs flagsQ
	discCats   map[string]bool // categories EpisodeEval memoizes as discoveries; nil: no memo
	factsCache factsCache
	// readsCall, readsHistory: some rule of the policy reads input.call,
	// input.history (lib.history); episodes pass them only then, so a
	// policy that reads neither converts no call for them (inputReads)
	readsCall, readsHistory bool
	rules                   []RuleInfo
}

// New loads, compiles and prepares the policy once.
func New(ctx context.Context, cfg Config) (*Engine, error) { return newEngineFS(ctx, cfg, policyFS) }

// newEngineFS is New with the default bundle read from bundle's policy/
// (tests add rules to it).
func newEngineFS(ctx context.Context, cfg Config, bundle fs.FS) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mods, docs, defaults, err := load(bundle, cfg.DisableDefault, cfg.PolicyDirs, false)
	if err != nil {
		return nil, err
	}
	var gt *gating
	if !cfg.DisablePrefilter {
		if gt, err = planGates(mods, docs, defaults); err != nil {
			return nil, fmt.Errorf("rules: %w", err)
		}
	}
	compiler := ast.NewCompiler().WithEnablePrintStatements(false)
	compiler.Compile(mods)
	if compiler.Failed() {
		return nil, compileError(compiler.Errors)
	}
	store := inmem.NewFromObject(docs)
	prep := func(q string) (rego.PreparedEvalQuery, error) {
		return rego.New(rego.Query(q), rego.Compiler(compiler), rego.Store(store)).PrepareForEval(ctx)
	}
	e := &Engine{log: log, rules: catalogue(compiler), compiler: compiler, store: store, prep: prep, gating: gt}
	if e.flagsQ, err = prep(FlagsQuery); err != nil {
		return nil, fmt.Errorf("rules: prepare %s: %w", FlagsQuery, asCompileError(err))
	}
	if e.netQ, err = prep(NetworkQuery); err != nil {
		return nil, fmt.Errorf("rules: prepare %s: %w", NetworkQuery, asCompileError(err))
	}
	if e.factsQ, err = prep(FactsQuery); err != nil {
		return nil, fmt.Errorf("rules: prepare %s: %w", FactsQuery, asCompileError(err))
	}
	e.discCats = discoveryCats(ctx, prep)
	e.readsCall, e.readsHistory = inputReads(compiler)
	return e, nil
}

// Eval evaluates one self-contained input document (see the README for
// its JSON) — for one-off checks such as `rollcage rules check`. The hot
// path uses EpisodeEval instead.
func (e *Engine) Eval(ctx context.Context, input any) ([]Flag, error) {
	v, err := toValue(input)
	if err != nil {
		return nil, fmt.Errorf("rules: eval: input: %w", err)
	}
	if obj, ok := v.(ast.Object); ok {
		obj = obj.Copy()
		if e.gating != nil {
			// every rule runs: a one-off input has no gates worked out
			obj.Insert(ast.StringTerm("gate"), e.gating.all)
		}
		if h := obj.Get(ast.InternedTerm("history")); h != nil && obj.Get(ast.InternedTerm("memo")) == nil {
			if m := e.memoOf(h.Value); m != nil {
				obj.Insert(ast.StringTerm("memo"), m)
			}
		}
		v = obj
	}
	return e.eval(ctx, e.flagsQ, v)
}

// eval runs a prepared query and fails closed: an evaluation error becomes
// one certain rule_error flag; only cancellation is returned.
func (e *Engine) eval(ctx context.Context, q rego.PreparedEvalQuery, input ast.Value) ([]Flag, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rules: eval: %w", err)
	}
	rs, err := q.Eval(ctx, rego.EvalParsedInput(input), rego.EvalMetrics(noMetrics))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("rules: eval: %w", ctxErr)
		}
		e.log.Error("rules: evaluation failed; failing closed", "err", err)
		return []Flag{evalErrorFlag(err)}, nil
	}
	flags, err := decodeFlags(rs)
	if err != nil {
		e.log.Error("rules: malformed flags; failing closed", "err", err)
		return []Flag{evalErrorFlag(err)}, nil
	}
	return flags, nil
}

// noMetrics spares each evaluation OPA's timers, which nothing reads.
var noMetrics = metrics.NoOp()

func evalErrorFlag(err error) Flag {
	return Flag{Rule: RuleEvalError, Category: CatRuleError, Severity: Certain, Reason: err.Error()}
}

func decodeFlags(rs rego.ResultSet) ([]Flag, error) {
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, nil // no rule package defined anything
	}
	list, ok := rs[0].Expressions[0].Value.([]any)
	if !ok {
		return nil, fmt.Errorf("flags: want a set or array, got %T", rs[0].Expressions[0].Value)
	}
	flags := make([]Flag, 0, len(list))
	for _, x := range list {
		m, ok := x.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("flag: want an object, got %T", x)
		}
		f := Flag{Rule: str(m["rule"]), Category: str(m["category"]), Severity: str(m["severity"]), Reason: str(m["reason"]), Evidence: str(m["evidence"])}
		if f.Rule == "" {
			return nil, fmt.Errorf("flag without a rule id: %v", m)
		}
		if f.Severity != Certain {
			f.Severity = Suspicious
		}
		flags = append(flags, f)
	}
	sort.Slice(flags, func(i, j int) bool {
		if flags[i].Rule != flags[j].Rule {
			return flags[i].Rule < flags[j].Rule
		}
		return flags[i].Evidence < flags[j].Evidence
	})
	return flags, nil
}

func str(x any) string {
	switch v := x.(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// toValue converts plain Go data (structs with JSON tags, maps, raw JSON)
// to an AST value. It round-trips through JSON; callers do it once per
// fact, not per evaluation.

// load reads the default bundle (unless disabled) and dirs. withTests keeps
// *_test.rego modules (for RunTests).
// defaults names the modules that came from the embedded bundle and were
// not replaced by a file of the same name.
func load(bundle fs.FS, disableDefault bool, dirs []string, withTests bool) (mods map[string]*ast.Module, docs map[string]any, defaults map[string]bool, err error) {
	filter := func(abspath string, info fs.FileInfo, depth int) bool {
		if info.IsDir() {
			return false
		}
		if !withTests && strings.HasSuffix(info.Name(), "_test.rego") {
			return true
		}
		return false
	}
	mods = map[string]*ast.Module{}
	docs = map[string]any{}
	defaults = map[string]bool{}
	add := func(res *loader.Result, def bool) error {
		for _, m := range res.Modules {
			mods[m.Name] = m.Parsed
			defaults[m.Name] = def
		}
		return merge(docs, res.Documents, "data")
	}
	if !disableDefault {
		res, err := loader.NewFileLoader().WithFS(bundle).WithProcessAnnotation(true).
			WithRegoVersion(ast.RegoV1).Filtered([]string{"policy"}, filter)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("rules: load default bundle: %w", asCompileError(err))
		}
		if err := add(res, true); err != nil {
			return nil, nil, nil, fmt.Errorf("rules: load default bundle: %w", err)
		}
	}
	if len(dirs) > 0 {
		res, err := loader.NewFileLoader().WithProcessAnnotation(true).
			WithRegoVersion(ast.RegoV1).Filtered(dirs, filter)
		if pe := pathError(err); pe != nil {
			// The loader's words ("1 error occurred during loading: stat
			// DIR: ...") would name the path twice.
			return nil, nil, nil, fmt.Errorf("rules: load %s: %w; give a directory or file of .rego policies that exists", pe.Path, pe.Err)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("rules: load %s: %w", strings.Join(dirs, ", "), asCompileError(err))
		}
		if err := add(res, false); err != nil {
			return nil, nil, nil, fmt.Errorf("rules: load %s: %w", strings.Join(dirs, ", "), err)
		}
	}
	for name, def := range defaults {
		if !def {
			delete(defaults, name)
		}
	}
	return mods, docs, defaults, nil
}

func merge(dst, src map[string]any, path string) error {
	for k, v := range src {
		old, ok := dst[k]
		if !ok {
			dst[k] = v
			continue
		}
		om, ok1 := old.(map[string]any)
		nm, ok2 := v.(map[string]any)
		if !ok1 || !ok2 {
			return fmt.Errorf("data conflict at %s.%s; keep each data key in one file", path, k)
		}
		if err := merge(om, nm, path+"."+k); err != nil {
			return err
		}
	}
	return nil
}

// asCompileError turns OPA's parse/compile errors into *CompileError and
// leaves anything else (a missing directory, say) as it is.
// pathError is the *fs.PathError an error of the loader is, when it is
// one alone (a policy path that is missing or unreadable); else nil.
func pathError(err error) *fs.PathError {
	var lerrs loader.Errors
	if errors.As(err, &lerrs) && len(lerrs) == 1 {
		err = lerrs[0]
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

func asCompileError(err error) error {
	var astErrs ast.Errors
	var one *ast.Error
	var lerrs loader.Errors
	switch {
	case errors.As(err, &astErrs):
		return compileError(astErrs)
	case errors.As(err, &lerrs):
		var all ast.Errors
		for _, e := range lerrs {
			var ae ast.Errors
			var a1 *ast.Error
			switch {
			case errors.As(e, &ae):
				all = append(all, ae...)
			case errors.As(e, &a1):
				all = append(all, a1)
			default:
				return err
			}
		}
		if len(all) == 0 {
			return err
		}
		return compileError(all)
	case errors.As(err, &one):
		return compileError(ast.Errors{one})
	}
	return err
}

func compileError(errs ast.Errors) *CompileError {
	all := make([]*CompileError, 0, len(errs))
	for _, e := range errs {
		ce := &CompileError{Code: e.Code, Message: e.Message}
		if e.Location != nil {
			ce.File, ce.Line, ce.Col = e.Location.File, e.Location.Row, e.Location.Col
		}
		all = append(all, ce)
	}
	if len(all) == 0 {
		return &CompileError{Message: "unknown compile error"}
	}
	first := *all[0]
	first.Errors = all
	return &first
}

// discoveryCats reads the categories the chained rules follow up on, so
// the memo Go keeps matches the policy. Nil when there is no such package.
func discoveryCats(ctx context.Context, prep func(string) (rego.PreparedEvalQuery, error)) map[string]bool {
	q, err := prep("data.rollcage.rules.chained_discovery.discovery_cats")
	if err != nil {
		return nil
	}
	rs, err := q.Eval(ctx)
	if err != nil || len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil
	}
	list, ok := rs[0].Expressions[0].Value.([]any)
	if !ok {
		return nil
	}
	out := map[string]bool{}
	for _, x := range list {
		if s, ok := x.(string); ok {
			out[s] = true
		}
	}
	return out
}

// inputReads reports whether some rule of the compiled policy reads
// input.call and input.history (directly, through lib.history, or the
// whole input).
func inputReads(c *ast.Compiler) (call, history bool) {
	libHistory := ast.MustParseRef("data.rollcage.lib.history")
	for _, m := range c.Modules {
		for _, r := range m.Rules {
			if m.Package.Path.Extend(r.Head.Ref().GroundPrefix()).Equal(libHistory) {
				continue // lib's own `history := input.history`
			}
			ast.WalkRefs(r, func(ref ast.Ref) bool {
				switch {
				case ref[0].Equal(ast.InputRootDocument):
					if len(ref) == 1 {
						call, history = true, true
					} else if k, ok := ref[1].Value.(ast.String); !ok {
						call, history = true, true
					} else {
						call = call || k == "call"
						history = history || k == "history"
					}
				case ref.HasPrefix(libHistory) || libHistory.HasPrefix(ref.GroundPrefix()) && len(ref) > len(ref.GroundPrefix()):
					history = true // lib.history, or lib[x]
				}
				return false
			})
		}
	}
	return call, history
}

// memoOf is input.memo for a one-off input's history (entries with
// flags), as an episode collects it; nil when the policy has no memo.
func (e *Engine) memoOf(h ast.Value) *ast.Term {
	arr, ok := h.(*ast.Array)
	if !ok || e.discCats == nil {
		return nil
	}
	ep := &EpisodeEval{eng: e}
	arr.Foreach(func(entry *ast.Term) {
		var disc []*ast.Term
		if o, ok := entry.Value.(ast.Object); ok {
			if fl := o.Get(ast.InternedTerm("flags")); fl != nil {
				if fa, ok := fl.Value.(*ast.Array); ok {
					fa.Foreach(func(f *ast.Term) {
						if fo, ok := f.Value.(ast.Object); ok && e.discCats[stringField(fo, "category")] {
							disc = append(disc, f)
						}
					})
				}
			}
		}
		ep.disc = append(ep.disc, disc)
	})
	return ep.buildMemo()
}
