package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/rollcage/rollcage/demo"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/docker"
	"github.com/rollcage/rollcage/task"
)

func init() {
	register(command{Name: "seal", Summary: "prepare the sealed images of a task file's tasks (the demo suite's by default): history beyond the base commit removed", Run: runSeal})
}

// addSealFlag is --no-seal, shared by every command that starts sandboxes.
func addSealFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("no-seal", false, "run on the task images as they are, the upstream fix reachable in the repository's history (default: sealed images, see the README)")
}

func sealNote(noSeal bool) string {
	if noSeal {
		return "unsealed images (--no-seal: the upstream fix is reachable in the history)"
	}
	return "sealed images (nothing beyond the base commit in the repository)"
}

// episodeImages are the images episodes of tasks run, each once: each
// task's sealed image (sealed now by sealer when missing) unless seal is
// off or the task says "seal": false; and the task image of a task whose
// image holds its hidden tests, where it is graded.
func episodeImages(ctx context.Context, tasks []task.Task, seal bool, sealer sandbox.Sealer) ([]string, error) {
	var out []string
	for _, t := range tasks {
		img := t.Image
		if seal && t.Sealed() {
			s, err := sealer.Seal(ctx, harness.SealSpec(t))
			if err != nil {
				return nil, fmt.Errorf("seal task %s: %w", t.ID, err)
			}
			img = s.Image
		}
		if !slices.Contains(out, img) {
			out = append(out, img)
		}
		if len(t.ImageHidden) > 0 && !slices.Contains(out, t.Image) {
			out = append(out, t.Image)
		}
	}
	return out, nil
}

func runSeal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("seal", "[--tasks FILE]", stderr)
	tasksFile := fs.String("tasks", "", "task file (JSONL); default: the embedded demo suite")
	var loadOpts task.LoadOptions
	instanceFlags(fs, &loadOpts)
	verbose := fs.Bool("v", false, "log what sealing did to stderr")
	refs := fs.Bool("refs", false, "print only the images episodes run, one per line (the sealed ones, and the task image of a task not sealed): what a Kubernetes node needs (KUBE_IMAGES of scripts/kube-up.sh)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var tasks []task.Task
	var err error
	if *tasksFile != "" {
		tasks, _, err = task.LoadFileWith(*tasksFile, loadOpts)
	} else {
		tasks, _, err = demo.Tasks()
	}
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	be, err := docker.New(ctx, docker.Config{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))})
	if err != nil {
		return err
	}
	defer be.Close(context.WithoutCancel(ctx))
	if *refs {
		images, err := episodeImages(ctx, tasks, true, be)
		if err != nil {
			return err
		}
		for _, img := range images {
			fmt.Fprintln(stdout, img)
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "task\timage\tsealed image\tstate\ttook\t")
	for _, t := range tasks {
		if !t.Sealed() {
			fmt.Fprintf(tw, "%s\t%s\t-\t\"seal\": false\t\t\n", t.ID, t.Image)
			continue
		}
		s, err := be.Seal(ctx, harness.SealSpec(t))
		if err != nil {
			tw.Flush()
			return fmt.Errorf("seal task %s: %w", t.ID, err)
		}
		state := "sealed"
		if s.Cached {
			state = "cached"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", t.ID, t.Image, s.Image, state, s.Took.Round(time.Millisecond))
	}
	return tw.Flush()
}
