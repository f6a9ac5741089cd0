package rules

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// RuleInfo describes one rule id of the loaded policy, taken from the
// `# METADATA` block above its rule (title, description and custom id,
// category, severity).
type RuleInfo struct {
	ID          string `json:"id"`
	Category    string `json:"category"`
	Severity    string `json:"severity"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Package     string `json:"package"`
}

// Categories lists the categories of the default bundle, in the order the
// docs present them.
func Categories() []string {
	return []string{CatProtected, CatHistory, CatNetwork, CatTampering, CatEvaluator,
		CatSpecialCase, CatProbing, CatChained}
}

// Rules is the catalogue of the loaded policy, sorted by id.
func (e *Engine) Rules() []RuleInfo { return append([]RuleInfo(nil), e.rules...) }

func catalogue(c *ast.Compiler) []RuleInfo {
	seen := map[string]bool{}
	var out []RuleInfo
	for _, ref := range c.GetAnnotationSet().Flatten() {
		a := ref.Annotations
		if a == nil || a.Custom == nil {
			continue
		}
		id, _ := a.Custom["id"].(string)
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		cat, _ := a.Custom["category"].(string)
		sev, _ := a.Custom["severity"].(string)
		out = append(out, RuleInfo{ID: id, Category: cat, Severity: sev, Title: a.Title,
			Description: a.Description, Package: ref.Path[:len(ref.Path)-1].String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// RunTests runs the Rego unit tests (rules named test_*) of the default
// bundle and of dirs, writing a report to w. failed counts failures and
// errors; err is for policies that do not load or compile.
func RunTests(ctx context.Context, dirs []string, w io.Writer, verbose bool) (passed, failed int, err error) {
	mods, docs, _, err := load(policyFS, false, dirs, true)
	if err != nil {
		return 0, 0, err
	}
	store := inmem.NewFromObject(docs)
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("rules: test: %w", err)
	}
	defer store.Abort(ctx, txn)
	// A test's own time limit is a minute, not OPA's 5 s: on a loaded
	// machine under -race a test of a user policy took over 5 s and was
	// reported an error. A test that loops still ends; ctx bounds them all.
	ch, err := tester.NewRunner().SetCompiler(ast.NewCompiler().WithEnablePrintStatements(true)).
		SetStore(store).SetModules(mods).CapturePrintOutput(true).SetTimeout(time.Minute).RunTests(ctx, txn)
	if err != nil {
		return 0, 0, fmt.Errorf("rules: test: %w", asCompileError(err))
	}
	fwd := make(chan *tester.Result)
	done := make(chan error, 1)
	go func() { done <- tester.PrettyReporter{Output: w, Verbose: verbose, FailureLine: true}.Report(fwd) }()
	for r := range ch {
		if r.Pass() {
			passed++
		} else {
			failed++
		}
		fwd <- r
	}
	close(fwd)
	if err := <-done; err != nil {
		return passed, failed, fmt.Errorf("rules: test: report: %w", err)
	}
	if passed+failed == 0 {
		return 0, 0, fmt.Errorf("rules: test: no test_ rules found in the default bundle or %v", dirs)
	}
	return passed, failed, nil
}
