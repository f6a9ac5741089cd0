package trajectory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// Export formats.
const (
	FormatMessages = "messages" // JSONL, one Sample per line
	FormatParquet  = "parquet"  // Parquet, one Sample per row
	FormatATIF     = "atif"     // JSONL, one ATIF trajectory per line (see ATIF)
)

// Export granularities: one sample per chain of model turns (a segment
// of the conversation that only grew) or one per model turn.
const (
	GranularitySegment = "segment"
	GranularityTurn    = "turn"
)

// ExportOptions say what Export writes. The zero value is messages JSONL,
// one sample per segment.
type ExportOptions struct {
	Format      string // FormatMessages (default), FormatParquet or FormatATIF
	Granularity string // GranularitySegment (default) or GranularityTurn; not for ATIF
}

func (o ExportOptions) withDefaults() (ExportOptions, error) {
	if o.Format == "" {
		o.Format = FormatMessages
	}
	if o.Granularity == "" {
		o.Granularity = GranularitySegment
	}
	switch o.Format {
	case FormatMessages, FormatParquet, FormatATIF:
	default:
		return o, fmt.Errorf("unknown format %q: use %q, %q or %q", o.Format, FormatMessages, FormatParquet, FormatATIF)
	}
	if o.Granularity != GranularitySegment && o.Granularity != GranularityTurn {
		return o, fmt.Errorf("unknown granularity %q: use %q or %q", o.Granularity, GranularitySegment, GranularityTurn)
	}
	return o, nil
}

// Export writes the training data of every finished episode in the log
// directory dir to w. Episodes without an episode_end event (still
// running, or crashed) are skipped. Every sample has a SampleID derived
// from (episode, kind, segment, turn) and is written at most once, so an
// export is the same however often, and after whatever crash, it runs. It
// only reads dir, so it is safe to run beside a live Store.
func Export(ctx context.Context, dir string, w io.Writer, opts ExportOptions) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return fmt.Errorf("trajectory: export: %w", err)
	}
	var emit func(id string, evs []Event) error
	var finish func() error
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	seen := map[string]bool{}
	fresh := func(ss []Sample) []Sample {
		out := ss[:0]
		for _, s := range ss {
			if !seen[s.SampleID] {
				seen[s.SampleID] = true
				out = append(out, s)
			}
		}
		return out
	}
	switch opts.Format {
	case FormatMessages:
		emit = func(_ string, evs []Event) error {
			ss, err := SamplesOf(evs, opts.Granularity)
			if err != nil {
				return err
			}
			for _, s := range fresh(ss) {
				if err := enc.Encode(&s); err != nil {
					return err
				}
			}
			return nil
		}
		finish = func() error { return nil }
	case FormatParquet:
		pw := parquet.NewGenericWriter[Sample](w)
		emit = func(_ string, evs []Event) error {
			ss, err := SamplesOf(evs, opts.Granularity)
			if err != nil {
				return err
			}
			_, err = pw.Write(fresh(ss))
			return err
		}
		finish = pw.Close
	case FormatATIF:
		emit = func(_ string, evs []Event) error {
			ts, err := ATIF(evs)
			if err != nil {
				return err
			}
			for _, t := range ts {
				if seen[t.SessionID] {
					continue
				}
				seen[t.SessionID] = true
				if err := enc.Encode(&t); err != nil {
					return err
				}
			}
			return nil
		}
		finish = func() error { return nil }
	}
	ids, err := episodeFiles(dir)
	if err != nil {
		return fmt.Errorf("trajectory: export: %w", err)
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("trajectory: export: %w", err)
		}
		evs, err := readFile(filepath.Join(dir, id+".jsonl"))
		if err != nil {
			return fmt.Errorf("trajectory: export %s: %w", id, err)
		}
		if err := emit(id, evs); err != nil {
			return fmt.Errorf("trajectory: export %s: %w", id, err)
		}
	}
	if err := finish(); err != nil {
		return fmt.Errorf("trajectory: export: %w", err)
	}
	return nil
}

func episodeFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no log directory %s: give the directory rollcage wrote trajectories to", dir)
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".jsonl"); ok && !e.IsDir() && ValidID(id) == nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// readFile reads a log's events; a torn last line is ignored.
func readFile(path string) ([]Event, error) {
	t, err := openTail(path, 0)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	var evs []Event
	for {
		line, _, err := t.Next()
		if errors.Is(err, io.EOF) || (errors.Is(err, ErrCorrupt) && t.atEnd()) {
			return evs, nil
		}
		if err != nil {
			return nil, err
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("offset %d: %w: %v", t.next-1, ErrCorrupt, err)
		}
		evs = append(evs, ev)
	}
}
