package trajectory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// Errors of RecordVerdict.
var (
	// ErrRunning: the episode has not ended; its own judge decides its
	// steps while it runs.
	ErrRunning = errors.New("episode has not ended")
	// ErrNotUnconfirmed: the step did not run unconfirmed (it is not in
	// the episode, was never flagged, or a judge decided it in the
	// episode).
	ErrNotUnconfirmed = errors.New("step is not unconfirmed")
	// ErrDecided: the step already has a late verdict.
	ErrDecided = errors.New("step already has a late verdict")
)

// RecordVerdict records v, a verdict on a step of the ended episode that
// ran unconfirmed, in the store's verdict log (fsynced), so every later
// export of the episode applies it (see LateVerdict). It refuses, with
// ErrNotFound, ErrRunning, ErrNotUnconfirmed or ErrDecided, a verdict on
// an unknown episode, on one still running, on a step that is not
// unconfirmed, or on one already decided: the first verdict stands.
func (s *Store) RecordVerdict(ctx context.Context, episodeID string, v LateVerdict) error {
	if err := ValidID(episodeID); err != nil {
		return err
	}
	s.vmu.Lock()
	defer s.vmu.Unlock()
	var evs []Event
	if err := s.read(ctx, episodeID, 0, func(ev Event) error { evs = append(evs, ev); return nil }); err != nil {
		return fmt.Errorf("trajectory: verdict on %s: %w", episodeID, err)
	}
	late, err := s.lateVerdicts(ctx, episodeID)
	if err != nil {
		return err
	}
	ep, ended, err := readEpisode(append(evs, late...))
	switch {
	case err != nil:
		return fmt.Errorf("trajectory: verdict on %s: %w", episodeID, err)
	case !ended:
		return fmt.Errorf("trajectory: verdict on %s step %d: %w", episodeID, v.Step, ErrRunning)
	case ep.decided[v.Step]:
		return fmt.Errorf("trajectory: verdict on %s step %d: %w", episodeID, v.Step, ErrDecided)
	case !ep.unconfirmed(v.Step):
		return fmt.Errorf("trajectory: verdict on %s step %d: %w", episodeID, v.Step, ErrNotUnconfirmed)
	}
	if s.verdicts == nil {
		if s.verdicts, err = s.openLog(verdictsName, 0); err != nil {
			return err
		}
	}
	ev, err := NewEvent(episodeID, 0, v.Step, TypeVerdict, v)
	if err != nil {
		return err
	}
	_, err = s.verdicts.Append(ev)
	return err
}

// LateVerdicts returns the verdicts recorded for the episode after its
// end (TypeVerdict events, oldest first), to give an Exporter after the
// episode's own events.
func (s *Store) LateVerdicts(ctx context.Context, episodeID string) ([]Event, error) {
	if err := ValidID(episodeID); err != nil {
		return nil, err
	}
	return s.lateVerdicts(ctx, episodeID)
}

func (s *Store) lateVerdicts(ctx context.Context, id string) ([]Event, error) {
	var out []Event
	err := s.read(ctx, verdictsName, 0, func(ev Event) error {
		if ev.EpisodeID == id && ev.Type == TypeVerdict {
			out = append(out, ev)
		}
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return nil, nil // no verdict recorded yet
	}
	return out, err
}

// lateVerdictsIn reads a log directory's verdict log, by episode.
func lateVerdictsIn(dir string) (map[string][]Event, error) {
	evs, err := readFile(filepath.Join(dir, verdictsName+".jsonl"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("verdict log: %w", err)
	}
	out := map[string][]Event{}
	for _, ev := range evs {
		if ev.Type == TypeVerdict {
			out[ev.EpisodeID] = append(out[ev.EpisodeID], ev)
		}
	}
	return out, nil
}
