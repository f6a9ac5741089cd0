package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing/fstest"

	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/task"
)

func init() {
	register(command{Name: "swebench-demo", Summary: "write the demo suite as SWE-bench instances and build their images (/testbed, SWE-bench's names) from the demo images", Run: runSWEBenchDemo})
}

// instancesFile is the name of the instances swebench-demo writes.
const instancesFile = "instances.jsonl"

func runSWEBenchDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("swebench-demo", "[--out DIR] [--only TASK] [--concurrency N]", stderr)
	out := fs.String("out", filepath.Join("out", "swebench-demo"), "directory for "+instancesFile)
	conc := fs.Int("concurrency", 2, "instances derived at once")
	var only stringList
	fs.Var(&only, "only", "only this demo task id (repeatable)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *conc < 1 {
		return fmt.Errorf("--concurrency %d: use 1 or more", *conc)
	}
	tasks, byID, hidden, _, err := loadSuite(demo.Scripts, only)
	if err != nil {
		return err
	}
	if len(only) > 0 {
		tasks = tasks[:0]
		for _, id := range only {
			tasks = append(tasks, byID[id])
		}
	}
	cli, err := dockerClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	for _, t := range tasks {
		from, err := imageID(ctx, cli, t.Image)
		if err != nil {
			return err
		}
		ctxFS := fstest.MapFS{"Dockerfile": {Data: []byte(demo.SWEBenchDockerfile(t)), Mode: 0o644}}
		built, err := buildImage(ctx, cli, demo.SWEBenchImage(t), from, "", ctxFS)
		if err != nil {
			return err
		}
		if built {
			fmt.Fprintf(stderr, "built %s from %s\n", demo.SWEBenchImage(t), t.Image)
		}
	}

	be, err := openBackend(ctx, backendOptions{flags: &backendFlags{kind: backendDocker}})
	if err != nil {
		return err
	}
	defer be.Close(context.WithoutCancel(ctx))
	insts := make([]demo.Instance, len(tasks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(*conc)
	for i, t := range tasks {
		g.Go(func() (err error) {
			insts[i], err = demo.DeriveInstance(gctx, be, t, hidden)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var buf bytes.Buffer
	fmt.Fprintln(&buf, "# The demo suite as SWE-bench instances, written by rollcage swebench-demo.")
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, in := range insts {
		if err := enc.Encode(in); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	file := filepath.Join(*out, instancesFile)
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		return err
	}
	// What rollcage reads back is what was meant.
	loaded, _, err := task.LoadFile(file)
	if err != nil {
		return fmt.Errorf("the instances written do not load: %w", err)
	}
	for i, t := range loaded {
		in := insts[i]
		if t.Image != demo.SWEBenchImage(tasks[i]) || !slices.Equal(t.FailToPass, in.FailToPass) {
			return fmt.Errorf("%s: loads as image %s with FAIL_TO_PASS %v, want %s and %v", in.InstanceID, t.Image, t.FailToPass, demo.SWEBenchImage(tasks[i]), in.FailToPass)
		}
		fmt.Fprintf(stdout, "%s  %s  %d FAIL_TO_PASS, %d PASS_TO_PASS\n", in.InstanceID, t.Image, len(in.FailToPass), len(in.PassToPass))
	}
	fmt.Fprintf(stdout, "\n%d instances in %s (rollcage run --tasks %s --policy ...)\n", len(insts), file, file)
	return nil
}
