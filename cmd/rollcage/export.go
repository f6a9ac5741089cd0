package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rollcage/rollcage/trajectory"
)

func init() {
	register(command{Name: "export", Summary: "export finished episodes as per-segment training samples (messages JSONL or Parquet)", Run: runExport})
}

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", "[--format messages|parquet] [--out FILE] DIR", stderr)
	format := fs.String("format", trajectory.FormatMessages, "messages (JSONL, one sample per line) or parquet")
	out := fs.String("out", "", "output file (default: stdout for messages; required for parquet)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		fmt.Fprintln(stderr, "rollcage export: give one DIR: a trajectory store, or a run's --out directory")
		return errUsage
	}
	if *format != trajectory.FormatMessages && *format != trajectory.FormatParquet {
		return fmt.Errorf("--format %q: use messages or parquet", *format)
	}
	dir := fs.Arg(0)
	// A run's output directory holds the store in trajectories/.
	if st, err := os.Stat(filepath.Join(dir, "trajectories")); err == nil && st.IsDir() {
		dir = filepath.Join(dir, "trajectories")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%s is not a directory: give the trajectory directory (e.g. out/demo or a run's --out)", fs.Arg(0))
	}
	var w io.Writer = stdout
	if *out == "" && *format == trajectory.FormatParquet {
		return errors.New("--out is required for parquet: Parquet is binary; name a file")
	}
	var f *os.File
	if *out != "" {
		var err error
		if f, err = os.Create(*out); err != nil {
			return err
		}
		w = f
	}
	err := trajectory.Export(ctx, dir, w, *format)
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(*out)
		}
	}
	return err
}
