package redteam

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/docker/dockertest"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
	"github.com/rollcage/rollcage/task"
)

// TestNarrowSolutionsSWEBenchForm grades the narrow solutions of
// testdata/narrow, the honest look-alikes and each task's reference fix
// on the demo tasks in SWE-bench's form, loaded as rollcage loads an
// instance: the repository at /testbed of the instance image, the hidden
// tests a test patch, the reference fix the instance's patch. The facts
// keep the instance's ids and add differential cases derived in a
// sandbox of the instance image; each narrow solution gets reward 1 (it
// passes the tests) and a special_casing flag, each honest one and the
// reference fix reward 1 and no finding. Without a fix_patch the same
// instance derives nothing and grades as before.
func TestNarrowSolutionsSWEBenchForm(t *testing.T) {
	if testing.Short() {
		t.Skip("grades the narrow solutions of the SWE-bench form in Docker")
	}
	b := dockertest.Backend(t)
	tasks, hidden, err := demo.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/narrow/*.py")
	if err != nil || len(files) == 0 {
		t.Fatalf("no narrow solutions: %v", err)
	}
	byTask := map[string][]string{}
	for _, f := range files {
		id, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(f), "ok-"), "-")
		byTask[id] = append(byTask[id], f)
	}
	flagged, narrow := 0, 0
	for _, id := range slices.Sorted(maps.Keys(byTask)) {
		t.Run(id, func(t *testing.T) {
			gradeSWEBenchForm(t, b, taskByID(t, tasks, id), hidden, byTask[id], &flagged, &narrow)
		})
	}
	t.Logf("narrow solutions flagged in SWE-bench form: %d of %d", flagged, narrow)
}

// gradeSWEBenchForm grades the solutions files of demo task tk and its
// reference fix on tk's instance form, counting the narrow ones and
// those flagged.
func gradeSWEBenchForm(t *testing.T, b sandbox.Backend, tk task.Task, hidden fs.FS, files []string, flagged, narrow *int) {
	ctx := context.Background()
	id := tk.ID
	inst := instanceOf(t, b, tk, hidden)
	facts := deriveFacts(t, b, inst, nil)
	if !facts.Declared || !slices.Equal(facts.FailToPass, inst.FailToPass) || len(facts.Cases) == 0 {
		t.Fatalf("%s facts: declared %t, FAIL_TO_PASS %v (instance %v), %d cases; want the instance's ids and cases",
			id, facts.Declared, facts.FailToPass, inst.FailToPass, len(facts.Cases))
	}
	for _, c := range facts.Cases {
		if c.File != demo.SWEBenchTestFile {
			t.Errorf("%s: a case in %q, want the test patch's file %s", id, c.File, demo.SWEBenchTestFile)
		}
	}
	// Without the fix there is nothing to derive: the declared ids
	// at once, no sandbox, as before.
	bare := inst
	bare.FixPatch = ""
	if bare.FactsNeedSandbox() {
		t.Errorf("%s without fix_patch: FactsNeedSandbox is true", id)
	} else if f, err := task.Derive(ctx, nil, bare, nil, task.Surface{}); err != nil || len(f.Cases) > 0 || !slices.Equal(f.FailToPass, inst.FailToPass) {
		t.Errorf("%s without fix_patch: Derive = %d cases, %v, %v; want the ids and no cases", id, len(f.Cases), f.FailToPass, err)
	}
	if id == "daterange" {
		// A fix that does not apply is the task's error, saying what to do.
		broken := inst
		broken.FixPatch = strings.Replace(inst.FixPatch, "\n-", "\n-x", 1)
		sb, err := b.Create(ctx, sandbox.Spec{Image: inst.Image, EpisodeID: "swe-broken-fix", Workdir: inst.Workdir, Network: sandbox.NetworkNone})
		if err != nil {
			t.Fatal(err)
		}
		surf, err := task.QuerySurface(ctx, sb, broken)
		if err == nil {
			_, err = task.Derive(ctx, sb, broken, nil, surf)
		}
		sb.Close(context.WithoutCancel(ctx))
		if !errors.Is(err, task.ErrGrading) || !strings.Contains(err.Error(), "remove fix_patch to grade without differential cases") {
			t.Errorf("a fix_patch that does not apply: Derive error %v; want a grading error saying what to do", err)
		}
		t.Logf("a fix_patch that does not apply: %v", err)
	}

	type solution struct {
		name   string
		honest bool
		write  func(sandbox.Sandbox) map[string]bool // the changed files
	}
	sols := []solution{{name: id + "-reference-fix", honest: true, write: func(sb sandbox.Sandbox) map[string]bool {
		if err := sb.WriteFile(ctx, "/tmp/fix.patch", []byte(inst.FixPatch), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "cd " + inst.Workdir + " && git apply /tmp/fix.patch 2>&1"})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("apply the reference fix: %v %s", err, res.Output)
		}
		changed := map[string]bool{}
		existing, created := task.PatchFiles(inst.FixPatch)
		for _, f := range append(existing, created...) {
			changed[f] = true
		}
		return changed
	}}}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(src), "\n")
		target, ok := strings.CutPrefix(first, "# file: ")
		if !ok {
			t.Fatalf("%s: first line must be '# file: <path>'", f)
		}
		target = strings.TrimSpace(target)
		name := strings.TrimSuffix(filepath.Base(f), ".py")
		sols = append(sols, solution{name: name, honest: strings.HasPrefix(name, "ok-"), write: func(sb sandbox.Sandbox) map[string]bool {
			if err := sb.WriteFile(ctx, inst.Workdir+"/"+target, src, 0o644); err != nil {
				t.Fatal(err)
			}
			return map[string]bool{target: true}
		}})
	}
	for _, s := range sols {
		sb, err := b.Create(ctx, sandbox.Spec{Image: inst.Image, EpisodeID: "swe-narrow-" + s.name, Workdir: inst.Workdir, Network: sandbox.NetworkNone})
		if err != nil {
			t.Fatal(err)
		}
		changed := s.write(sb)
		surf, err := task.QuerySurface(ctx, sb, inst)
		if err != nil {
			t.Fatal(err)
		}
		res, err := task.GradeWatched(ctx, sb, inst, nil, task.Watch{Facts: facts, Surface: surf, Changed: changed})
		sb.Close(context.WithoutCancel(ctx))
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		var findings []string
		for _, x := range res.Findings {
			findings = append(findings, x.Severity+" "+x.Category+" "+x.Rule+" "+x.Evidence)
		}
		t.Logf("%-28s reward=%v cases=%d differ=%d took=%s findings=%q", s.name, res.Reward, res.Cases, res.CasesFailed, res.Duration.Round(time.Millisecond), findings)
		switch {
		case res.Reward != 1 || res.Integrity != task.IntegrityWatched:
			t.Errorf("%s: reward %v, integrity %s; want 1, watched (it passes the tests); statuses %v", s.name, res.Reward, res.Integrity, res.Statuses)
		case res.Cases != len(facts.Cases):
			t.Errorf("%s: %d cases ran, want %d", s.name, res.Cases, len(facts.Cases))
		case s.honest && len(res.Findings) > 0:
			t.Errorf("honest %s: findings %q, want none", s.name, findings)
		case s.honest:
		case !slices.ContainsFunc(res.Findings, func(f task.Finding) bool {
			return f.Rule == "grade.differential" && f.Category == "special_casing" && f.Severity == "suspicious"
		}):
			t.Errorf("narrow %s: findings %q; want a suspicious special_casing flag (%d of %d cases differ)", s.name, findings, res.CasesFailed, res.Cases)
		}
		if !s.honest {
			*narrow++
			if res.CasesFailed > 0 {
				*flagged++
			}
		}
	}
}

// instanceOf is demo task tk as a SWE-bench instance, loaded as rollcage
// loads one (its image built from the demo image when missing, its
// FAIL_TO_PASS and PASS_TO_PASS derived by running it).
func instanceOf(t testing.TB, b sandbox.Backend, tk task.Task, hidden fs.FS) task.Task {
	t.Helper()
	buildInstanceImage(t, tk)
	in, err := demo.DeriveInstance(context.Background(), b, tk, hidden)
	if err != nil {
		t.Fatal(err)
	}
	line, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := task.Load(fstest.MapFS{"instances.jsonl": {Data: append(line, '\n')}}, "instances.jsonl")
	if err != nil || len(loaded) != 1 {
		t.Fatalf("load the instance of %s: %v (%d tasks)", tk.ID, err, len(loaded))
	}
	it := loaded[0]
	if it.Image != demo.SWEBenchImage(tk) || it.FixPatch == "" || it.TestFramework() != task.FrameworkPytest {
		t.Fatalf("%s loads as image %s, fix %d bytes, framework %s", tk.ID, it.Image, len(it.FixPatch), it.TestFramework())
	}
	return it
}

// buildInstanceImage builds demo task tk's instance image from its demo
// image (demo.SWEBenchDockerfile), as rollcage swebench-demo does, unless
// it was built from that image already; it never pulls.
func buildInstanceImage(t testing.TB, tk task.Task) {
	t.Helper()
	ctx := context.Background()
	const labelFrom = "rollcage.built-from" // as cmd/rollcage labels it
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	from, err := cli.ImageInspect(ctx, tk.Image)
	if err != nil {
		sandboxtest.Unavailable(t, "image "+tk.Image+" is missing: make images")
	}
	ref := demo.SWEBenchImage(tk)
	info, err := cli.ImageInspect(ctx, ref)
	switch {
	case err == nil && info.Config != nil && info.Config.Labels[labelFrom] == from.ID:
		return
	case err != nil && !cerrdefs.IsNotFound(err):
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	df := demo.SWEBenchDockerfile(tk)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(df))
	tw.Close()
	res, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{ref}, Remove: true, ForceRemove: true, Labels: map[string]string{labelFrom: from.ID}})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := jsonmessage.DisplayJSONMessagesStream(res.Body, io.Discard, 0, false, nil); err != nil {
		t.Fatalf("build %s: %v", ref, err)
	}
}
