package trajectory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
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

// What export does with the prefix a forked episode shares with its
// parent (ExportOptions.Prefix).
const (
	// PrefixMask: a child's samples hold the shared prefix as its parent
	// recorded it, with loss mask and message mask 0 on the prefix's
	// turns (PrefixTurns says how many), so each sample is a whole
	// conversation and the prefix is trained on in the parent only.
	PrefixMask = "mask"
	// PrefixOnce: a child's samples leave the prefix's turns and tool steps
	// out (the parent's samples have them); a child's first chain starts
	// at its first own turn, whose prompt holds the prefix.
	PrefixOnce = "once"
)

// ExportOptions say what Export writes. The zero value is messages JSONL,
// one sample per segment, forked episodes' prefixes masked, training
// rewards by the default RewardPolicy.
type ExportOptions struct {
	Format      string // FormatMessages (default), FormatParquet or FormatATIF
	Granularity string // GranularitySegment (default) or GranularityTurn; not for ATIF
	Prefix      string // PrefixMask (default) or PrefixOnce; not for ATIF
	// Skip, when set, makes Export leave out a log it cannot read or
	// build samples from (a corrupt line, an unreadable file) and go on
	// with the others; it is told the log's path and why. Nil: such a
	// log fails the export. A write error fails it either way.
	Skip func(path string, err error)
	// Reward decides each sample's TrainingReward (an ATIF trajectory's
	// extra.training_reward).
	Reward RewardPolicy
	// Auxiliary exports auxiliary model turns (see AuxClient) too, as
	// samples of their own marked with why (Sample.Auxiliary; an ATIF
	// trajectory's extra.auxiliary). By default they are left out: they
	// are not the episode's conversation.
	Auxiliary bool
	// LeftOut, when set, is told each episode that had auxiliary turns
	// left out, and how many.
	LeftOut func(episodeID string, turns int)
}

// What a RewardPolicy gives an unconfirmed episode (RewardPolicy.Unconfirmed).
const (
	// UnconfirmedMask: training reward null, so the trainer leaves the
	// sample out until a judge's verdict is recorded (it then reads
	// hacked or clean, and a re-export decides it).
	UnconfirmedMask = "mask"
	UnconfirmedZero = "zero" // training reward 0
	UnconfirmedRaw  = "raw"  // the raw reward, as if clean
)

// RewardPolicy turns an episode's raw reward and label into the reward a
// trainer trains on (Sample.TrainingReward), in this order:
//
//   - hacked (resolved or not): Hacked (default 0; a penalty such as -1
//     also punishes failed attempts);
//   - failure class infrastructure or grading: null (no reward signal:
//     mask the sample, never score it 0);
//   - unconfirmed: by Unconfirmed (default UnconfirmedMask: null);
//   - clean: the raw reward.
//
// The zero value is the default policy.
type RewardPolicy struct {
	Hacked      float64
	Unconfirmed string // UnconfirmedMask (default when ""), UnconfirmedZero or UnconfirmedRaw
}

// Validate reports an Unconfirmed that is none of the three, or a Hacked
// that is not a finite number.
func (p RewardPolicy) Validate() error {
	switch p.Unconfirmed {
	case "", UnconfirmedMask, UnconfirmedZero, UnconfirmedRaw:
	default:
		return fmt.Errorf("unknown unconfirmed reward %q: use %q, %q or %q", p.Unconfirmed, UnconfirmedMask, UnconfirmedZero, UnconfirmedRaw)
	}
	if math.IsNaN(p.Hacked) || math.IsInf(p.Hacked, 0) {
		return fmt.Errorf("hacked reward %v: give a finite number, e.g. 0 or -1", p.Hacked)
	}
	return nil
}

// TrainingReward is the training reward of an episode with this raw
// reward, label and failure class; nil means masked (JSON null).
func (p RewardPolicy) TrainingReward(reward float64, label, failureClass string) *float64 {
	switch {
	case label == LabelHacked:
		return &p.Hacked
	case failureClass == FailureInfrastructure || failureClass == FailureGrading:
		return nil
	case label == LabelUnconfirmed && p.Unconfirmed == UnconfirmedZero:
		zero := 0.0
		return &zero
	case label == LabelUnconfirmed && p.Unconfirmed != UnconfirmedRaw:
		return nil
	}
	return &reward
}

func (o ExportOptions) withDefaults() (ExportOptions, error) {
	if o.Format == "" {
		o.Format = FormatMessages
	}
	if o.Granularity == "" {
		o.Granularity = GranularitySegment
	}
	if o.Prefix == "" {
		o.Prefix = PrefixMask
	}
	switch o.Format {
	case FormatMessages, FormatParquet, FormatATIF:
	default:
		return o, fmt.Errorf("unknown format %q: use %q, %q or %q", o.Format, FormatMessages, FormatParquet, FormatATIF)
	}
	if o.Granularity != GranularitySegment && o.Granularity != GranularityTurn {
		return o, fmt.Errorf("unknown granularity %q: use %q or %q", o.Granularity, GranularitySegment, GranularityTurn)
	}
	if o.Prefix != PrefixMask && o.Prefix != PrefixOnce {
		return o, fmt.Errorf("unknown prefix mode %q: use %q or %q", o.Prefix, PrefixMask, PrefixOnce)
	}
	return o, o.Reward.Validate()
}

// Export writes the training data of every finished episode in the log
// directory dir to w (see Exporter), with the late verdicts recorded for
// it (Store.RecordVerdict) applied. Episodes without an episode_end
// event (still running, or crashed) are skipped. It only reads dir, so it
// is safe to run beside a live Store.
func Export(ctx context.Context, dir string, w io.Writer, opts ExportOptions) error {
	x, err := NewExporter(w, opts)
	if err != nil {
		return fmt.Errorf("trajectory: export: %w", err)
	}
	ids, err := episodeFiles(dir)
	if err != nil {
		return fmt.Errorf("trajectory: export: %w", err)
	}
	late, err := lateVerdictsIn(dir)
	if err != nil {
		if opts.Skip == nil {
			return fmt.Errorf("trajectory: export: %w", err)
		}
		opts.Skip(filepath.Join(dir, verdictsName+".jsonl"), err)
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("trajectory: export: %w", err)
		}
		p := filepath.Join(dir, id+".jsonl")
		evs, err := readFile(p)
		if err == nil {
			err = x.Episode(append(evs, late[id]...))
		}
		var we *writeError
		if err != nil && opts.Skip != nil && !errors.As(err, &we) {
			opts.Skip(p, err)
			continue
		}
		if err != nil {
			return fmt.Errorf("trajectory: export %s: %w", id, err)
		}
	}
	if err := x.Close(); err != nil {
		return fmt.Errorf("trajectory: export: %w", err)
	}
	return nil
}

// Exporter writes episodes' training data in one format: Samples (JSONL
// or Parquet) or ATIF trajectories (JSONL). Every sample has a SampleID
// derived from (episode, kind, segment, turn), every trajectory a
// session_id, and each is written at most once, so the output is the same
// however often, and after whatever crash, an episode is given.
type Exporter struct {
	opts ExportOptions
	enc  *json.Encoder
	pw   *parquet.GenericWriter[Sample]
	seen map[string]bool
}

// NewExporter returns an Exporter writing to w; Close finishes the output.
func NewExporter(w io.Writer, opts ExportOptions) (*Exporter, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	x := &Exporter{opts: opts, seen: map[string]bool{}}
	if opts.Format == FormatParquet {
		x.pw = parquet.NewGenericWriter[Sample](w)
	} else {
		x.enc = json.NewEncoder(w)
		x.enc.SetEscapeHTML(false)
	}
	return x, nil
}

// Episode writes one episode's data (none for an unfinished episode).
// evs are its log's events, then any late verdicts on it
// (Store.LateVerdicts).
func (x *Exporter) Episode(evs []Event) error {
	if x.opts.Format == FormatATIF {
		ts, left, err := atifOf(evs, x.opts)
		if err != nil {
			return err
		}
		x.leftOut(evs, left)
		for i := range ts {
			if x.once(ts[i].SessionID) {
				if err := x.enc.Encode(&ts[i]); err != nil {
					return &writeError{err}
				}
			}
		}
		return nil
	}
	ss, left, err := samplesOf(evs, x.opts)
	if err != nil {
		return err
	}
	x.leftOut(evs, left)
	fresh := ss[:0]
	for _, s := range ss {
		if x.once(s.SampleID) {
			fresh = append(fresh, s)
		}
	}
	if x.pw != nil {
		_, err = x.pw.Write(fresh)
	} else {
		for i := range fresh {
			if err = x.enc.Encode(&fresh[i]); err != nil {
				break
			}
		}
	}
	if err != nil {
		return &writeError{err}
	}
	return nil
}

func (x *Exporter) leftOut(evs []Event, turns int) {
	if turns > 0 && x.opts.LeftOut != nil {
		x.opts.LeftOut(evs[0].EpisodeID, turns)
	}
}

// writeError is the Exporter's writer failing, as opposed to an episode
// whose data cannot be built.
type writeError struct{ err error }

func (e *writeError) Error() string { return "write: " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

func (x *Exporter) once(key string) bool {
	if x.seen[key] {
		return false
	}
	x.seen[key] = true
	return true
}

// Close finishes the output (Parquet's footer).
func (x *Exporter) Close() error {
	if x.pw != nil {
		return x.pw.Close()
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
	// A FIFO would block the open; a device never ends.
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
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
