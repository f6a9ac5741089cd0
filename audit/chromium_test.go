package audit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollcage/rollcage/internal/golden"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// browser starts headless Chromium with no network features and a fresh
// profile, and returns a tab's context.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(sandboxtest.Chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1400),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	return bctx
}

// TestHTMLReportInChromium renders the corpus report in headless Chromium,
// checks what it shows, and with -update saves docs/audit-report.png for
// the README.
func TestHTMLReportInChromium(t *testing.T) {
	ctx := browser(t)
	rep := auditCorpus(t, nil)
	file := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(f); err != nil {
		t.Fatal(err)
	}
	f.Close()

	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+file), chromedp.WaitVisible(chromedp.CSS("#episodes"))); err != nil {
		t.Fatal(err)
	}
	rows := eval[int](t, ctx, `document.querySelectorAll('#episodes tr.ep-row').length`)
	hackSteps := eval[int](t, ctx, `document.querySelectorAll('li.step.hack').length`)
	bars := eval[int](t, ctx, `document.querySelectorAll('svg.chart rect.bar').length`)
	chartSVGs := eval[int](t, ctx, `document.querySelectorAll('svg#chart-category, svg#chart-task').length`)
	hacked := eval[string](t, ctx, `document.querySelector('#hacked-resolutions').textContent`)
	firstHack := eval[string](t, ctx, `(function(){var s=document.querySelector('li.step.hack'); return s.textContent + ' | ' + getComputedStyle(s).backgroundColor})()`)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if rows != len(rep.Episodes) {
		t.Errorf("episode rows = %d, want %d", rows, len(rep.Episodes))
	}
	if hackSteps == 0 {
		t.Error("no highlighted hack step")
	}
	if chartSVGs != 2 || bars == 0 {
		t.Errorf("charts: %d svgs, %d bars; want 2 charts with bars", chartSVGs, bars)
	}
	if hacked != "2" {
		t.Errorf("hacked resolutions shown %q, want 2", hacked)
	}
	if want := "rgb(253, 236, 234)"; !strings.Contains(firstHack, want) || !strings.Contains(firstHack, "history.") {
		t.Errorf("first hack step %q: want the history evidence on a %s background", firstHack, want)
	}
	// The filter hides every row but the chosen class.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#filters button[data-class="clean_resolved"]`))); err != nil {
		t.Fatal(err)
	}
	visible := eval[int](t, ctx, `Array.from(document.querySelectorAll('#episodes tr.ep-row')).filter(r => r.style.display !== 'none').length`)
	if visible != rep.Summary.Classes[ClassCleanResolved] {
		t.Errorf("after filtering clean_resolved: %d rows visible, want %d", visible, rep.Summary.Classes[ClassCleanResolved])
	}
	// The flagged-count column, the flagged-only view, the jump to the
	// next flag and the folded long calls.
	wantFlagged, wantFolds, firstFlag := 0, 0, ""
	for _, e := range rep.Episodes {
		for _, st := range e.Steps {
			if st.Flagged {
				wantFlagged++
				if firstFlag == "" {
					firstFlag = fmt.Sprint(st.Step)
				}
			}
			if fold(st.Call).Long {
				wantFolds++
			}
		}
	}
	counted := eval[int](t, ctx, `Array.from(document.querySelectorAll('#episodes td.flagged-count')).reduce((n, td) => n + Number(td.textContent), 0)`)
	if counted != wantFlagged {
		t.Errorf("flagged-count column sums to %d, want %d", counted, wantFlagged)
	}
	if got := eval[int](t, ctx, `document.querySelectorAll('details.fold').length`); got != wantFolds {
		t.Errorf("%d folded calls, want %d (calls over %d lines)", got, wantFolds, foldLines)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#filters button[data-class=""]`)), chromedp.Click(chromedp.CSS(`#flagged-only`))); err != nil {
		t.Fatal(err)
	}
	shown := eval[int](t, ctx, `Array.from(document.querySelectorAll('li.step')).filter(s => getComputedStyle(s).display !== 'none').length`)
	if shown != wantFlagged {
		t.Errorf("flagged steps only: %d steps shown, want %d", shown, wantFlagged)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#next-flag`))); err != nil {
		t.Fatal(err)
	}
	cur := eval[string](t, ctx, `(function(){var s=document.querySelector('li.step.current'); return s ? s.dataset.step + ' ' + s.closest('details.episode').open : 'none'})()`)
	if cur != firstFlag+" true" {
		t.Errorf("next flag: current step %q, want step %s in an opened episode", cur, firstFlag)
	}
	if len(png) < 10_000 {
		t.Errorf("screenshot is %d bytes; want a rendered page", len(png))
	}
	if golden.Update() { // the README's screenshot, refreshed on request only
		if err := os.WriteFile(filepath.Join("..", "docs", "audit-report.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}
