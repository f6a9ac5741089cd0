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
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// Export formats.
const (
	FormatMessages = "messages" // JSONL, one Sample per line
	FormatParquet  = "parquet"  // Parquet, one Sample per row
)

// Sample is one training sample: one segment of one finished episode.
// Messages, LossMask, TokenIDs and Logprobs are parallel (one entry per
// message).
type Sample struct {
	EpisodeID string `json:"episode_id" parquet:"episode_id"`
	TaskID    string `json:"task_id" parquet:"task_id"`
	Segment   int64  `json:"segment" parquet:"segment"`
	Attempt   int64  `json:"attempt" parquet:"attempt"`
	// Summary is the compaction summary that opened the segment ("" for
	// segment 0).
	Summary  string    `json:"summary,omitempty" parquet:"summary"`
	Messages []Message `json:"messages" parquet:"messages,list"`
	// LossMask is 1 for messages the policy produced in this segment (the
	// assistant turns recorded as model_turn responses), 0 for everything
	// else: system, user, tool outputs, dummy outputs, the injected summary.
	LossMask []int32 `json:"loss_mask" parquet:"loss_mask,list"`
	// TokenIDs and Logprobs are the recorded completion tokens of each
	// policy message; empty for other messages or when not recorded.
	TokenIDs [][]int64   `json:"token_ids" parquet:"token_ids,list"`
	Logprobs [][]float64 `json:"logprobs" parquet:"logprobs,list"`

	// The episode's outcome, the same on every segment.
	Reward   float64 `json:"reward" parquet:"reward"`
	Resolved bool    `json:"resolved" parquet:"resolved"`
	Hacked   bool    `json:"hacked" parquet:"hacked"`
	// Label is "hacked", "unconfirmed" (a flagged call no judge confirmed
	// or cleared; not a clean sample) or "clean".
	Label          string   `json:"label" parquet:"label"`
	HackCategories []string `json:"hack_categories" parquet:"hack_categories,list"`
	BlockedSteps   []int64  `json:"blocked_steps" parquet:"blocked_steps,list"`
	FailureClass   string   `json:"failure_class" parquet:"failure_class"`
}

// Export writes the training samples of every finished episode in the log
// directory dir to w, in format FormatMessages or FormatParquet. Episodes
// without an episode_end event (still running, or crashed) are skipped, as
// are segments without a model turn. It only reads dir, so it is safe to
// run beside a live Store.
func Export(ctx context.Context, dir string, w io.Writer, format string) error {
	var emit func([]Sample) error
	var finish func() error
	switch format {
	case FormatMessages:
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		emit = func(ss []Sample) error {
			for i := range ss {
				if err := enc.Encode(&ss[i]); err != nil {
					return err
				}
			}
			return nil
		}
		finish = func() error { return nil }
	case FormatParquet:
		pw := parquet.NewGenericWriter[Sample](w)
		emit = func(ss []Sample) error { _, err := pw.Write(ss); return err }
		finish = pw.Close
	default:
		return fmt.Errorf("trajectory: export: unknown format %q: use %q or %q", format, FormatMessages, FormatParquet)
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
		samples, err := Samples(evs)
		if err != nil {
			return fmt.Errorf("trajectory: export %s: %w", id, err)
		}
		if err := emit(samples); err != nil {
			return fmt.Errorf("trajectory: export %s: write: %w", id, err)
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

// Samples turns one episode's events into its training samples, one per
// segment with at least one model turn, in segment order. It returns none
// for an episode without an episode_end event.
//
// A segment's conversation is the Request of its last model_turn plus
// that turn's Response (see ModelTurn). An assistant message at index i
// is the policy's own when a model_turn of the segment sent i messages and
// got exactly that message back: it gets loss mask 1 and that turn's
// tokens. Everything else gets 0.
func Samples(evs []Event) ([]Sample, error) {
	var (
		start    EpisodeStart
		end      EpisodeEnd
		ended    bool
		cats     []string
		blocked  []int64
		hacked   bool
		unconf   int
		summary  = map[int]string{}
		turns    = map[int][]ModelTurn{}
		segments []int
	)
	for _, ev := range evs {
		var err error
		switch ev.Type {
		case TypeEpisodeStart:
			err = ev.Decode(&start)
		case TypeModelTurn:
			var mt ModelTurn
			if err = ev.Decode(&mt); err == nil {
				if _, ok := turns[ev.Segment]; !ok {
					segments = append(segments, ev.Segment)
				}
				turns[ev.Segment] = append(turns[ev.Segment], mt)
			}
		case TypeCompaction:
			var c Compaction
			if err = ev.Decode(&c); err == nil {
				summary[c.To] = c.Summary
			}
		case TypeDecision:
			var d Decision
			if err = ev.Decode(&d); err == nil {
				if d.Blocked {
					blocked = append(blocked, int64(ev.Step))
				}
				hack, cat := d.Hack, d.Categories
				if len(d.Verdict) > 0 {
					// The judge's verdict, read loosely: its schema is not ours.
					var v struct {
						Hack     bool   `json:"hack"`
						Category string `json:"category"`
					}
					if json.Unmarshal(d.Verdict, &v) == nil && v.Hack {
						hack = true
						if v.Category != "" {
							cat = append(slices.Clone(cat), v.Category)
						}
					}
				}
				if d.Unconfirmed {
					unconf++
				}
				if hack || d.Blocked {
					hacked = true
					cats = append(cats, cat...)
				}
			}
		case TypeEpisodeEnd:
			err = ev.Decode(&end)
			ended = true
		}
		if err != nil {
			return nil, err
		}
	}
	if !ended {
		return nil, nil
	}
	slices.Sort(cats)
	cats = slices.Compact(cats)
	label := end.Label
	if label == "" || hacked { // an older log, or a hack its end did not count
		label = EpisodeLabel(hacked || end.Hacked, max(unconf, end.Counts.Unconfirmed))
	}
	var out []Sample
	for _, seg := range segments {
		ts := turns[seg]
		last := ts[len(ts)-1]
		msgs := append(slices.Clone(last.Request), last.Response)
		s := Sample{
			EpisodeID:      evs[0].EpisodeID,
			TaskID:         start.TaskID,
			Segment:        int64(seg),
			Attempt:        int64(start.Attempt),
			Summary:        summary[seg],
			Messages:       msgs,
			LossMask:       make([]int32, len(msgs)),
			TokenIDs:       make([][]int64, len(msgs)),
			Logprobs:       make([][]float64, len(msgs)),
			Reward:         end.Reward,
			Resolved:       end.Resolved,
			Hacked:         hacked || end.Hacked,
			Label:          label,
			HackCategories: cats,
			BlockedSteps:   blocked,
			FailureClass:   end.FailureClass,
		}
		for _, mt := range ts {
			i := len(mt.Request)
			if i < len(msgs) && msgs[i].Role == RoleAssistant && reflect.DeepEqual(msgs[i], mt.Response) {
				s.LossMask[i] = 1
				s.TokenIDs[i] = mt.TokenIDs
				s.Logprobs[i] = mt.Logprobs
			}
		}
		out = append(out, s)
	}
	return out, nil
}
