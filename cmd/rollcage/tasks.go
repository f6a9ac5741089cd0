package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/task"
)

func init() {
	register(command{Name: "tasks", Summary: "check task files (rollcage's own, SWE-bench-family instances) or Harbor task directories (tasks check FILE|DIR)", Run: runTasks})
}

const tasksUsage = "usage: rollcage tasks check [--image-template T] [--hints] [--images] FILE|DIR"

func runTasks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := subcommand(args, "check", tasksUsage, stderr); err != nil {
		return err
	}
	fs := newFlags("tasks check", "[--image-template T] [--hints] [--images] FILE|DIR", stderr)
	var o task.LoadOptions
	instanceFlags(fs, &o)
	images := fs.Bool("images", false, "also ask the local Docker engine for each task's image: a missing one is a problem (rollcage never pulls), unless the task builds it")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, tasksUsage)
		return errUsage
	}
	arg := fs.Arg(0)
	// Each check returns what to name its tasks by, what it found, and
	// the file system their hidden tests are read from.
	var check []func() (string, []task.Task, iofs.FS, []*task.LoadError)
	if st, err := os.Stat(arg); err == nil && st.IsDir() && task.IsHarborDir(os.DirFS(arg), ".") {
		check = append(check, func() (string, []task.Task, iofs.FS, []*task.LoadError) {
			tasks, hidden, problems := task.CheckHarborDir(arg)
			return arg, tasks, hidden, problems
		})
	} else {
		files, err := taskFiles(arg)
		if err != nil {
			fmt.Fprintf(stderr, "rollcage tasks check: %v\n", err)
			return errUsage
		}
		for _, f := range files {
			check = append(check, func() (string, []task.Task, iofs.FS, []*task.LoadError) {
				tasks, hidden, problems := task.CheckFile(f, o)
				return f, tasks, hidden, problems
			})
		}
	}
	ntasks, nproblems := 0, 0
	for _, c := range check {
		from, tasks, hidden, problems := c()
		for _, t := range tasks {
			fmt.Fprintf(stdout, "%s: %s\n", from, t.ID)
			for _, it := range t.Plan() {
				fmt.Fprintf(stdout, "  %-12s %s\n", it.Key, it.Value)
			}
			// Where the differential cases cannot perturb a test, or
			// only with care; an unreadable hidden-tests directory is
			// the load's problem to report, not this line's.
			notes, _ := task.CaseNotes(t, hidden)
			for _, n := range notes {
				fmt.Fprintf(stdout, "  %-12s %s\n", "cases", n)
			}
		}
		for _, p := range problems {
			fmt.Fprintln(stdout, p.Error())
		}
		ntasks += len(tasks)
		nproblems += len(problems)
		if *images {
			missing, err := missingImages(ctx, tasks)
			if err != nil {
				return err
			}
			for _, t := range missing {
				fmt.Fprintf(stdout, "%s: %s: image %s is not present locally; rollcage never pulls: pull or build it first\n", from, t.ID, t.Image)
			}
			nproblems += len(missing)
		}
	}
	fmt.Fprintf(stdout, "%d tasks ready, %d problems\n", ntasks, nproblems)
	if nproblems > 0 {
		return &exitError{Code: 1}
	}
	return nil
}

// taskFiles is the file p, or the *.jsonl and *.json files directly in the
// directory p (a Harbor task or dataset directory is read apart).
func taskFiles(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".jsonl") || strings.HasSuffix(e.Name(), ".json")) {
			files = append(files, filepath.Join(p, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, errors.New(p + " holds no task file (*.jsonl, *.json)")
	}
	sort.Strings(files)
	return files, nil
}

// missingImages are the tasks whose image the local Docker engine does
// not have and that do not build it themselves.
func missingImages(ctx context.Context, tasks []task.Task) ([]task.Task, error) {
	if len(tasks) == 0 {
		return nil, nil
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var missing []task.Task
	for _, t := range tasks {
		_, err := cli.ImageInspect(ctx, t.Image)
		switch {
		case cerrdefs.IsNotFound(err):
			if t.BuildContext == "" {
				missing = append(missing, t)
			}
		case err != nil:
			return nil, fmt.Errorf("%w: no Docker engine reachable for --images: start dockerd or drop the flag (%v)", sandbox.ErrUnavailable, err)
		}
	}
	return missing, nil
}

// instanceFlags are the flags of every command that takes --tasks: how
// benchmark instances (SWE-bench and family) load.
func instanceFlags(fs *flag.FlagSet, o *task.LoadOptions) {
	fs.StringVar(&o.ImageTemplate, "image-template", "", "image of every instance, with {id} (SWE-bench's naming), {id_s} (SWE-Gym's) or {instance_id}; default: each benchmark's own")
	fs.BoolVar(&o.Hints, "hints", false, "show instances' hints_text to the policy, after the problem statement")
}
