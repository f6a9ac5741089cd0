package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/rollcage/rollcage/trajectory"
)

// VerdictResponse answers POST /v1/episodes/{id}/verdicts: the verdict
// as recorded.
type VerdictResponse struct {
	EpisodeID string `json:"episode_id"`
	trajectory.LateVerdict
}

// handleVerdict records a late verdict on an ended episode's unconfirmed
// step (trajectory.Store.RecordVerdict): a judge run after the episode,
// or a reviewer, decides what no judge decided while it ran, and the
// episode's samples carry the decided label and training reward from
// then on. Admin only: a policy must not clear its own flags.
func (s *Server) handleVerdict(w http.ResponseWriter, r *http.Request, _ caller) {
	id := r.PathValue("id")
	if trajectory.ValidID(id) != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("episode %q has no trajectory: GET /v1/episodes?all=1 lists them", id))
		return
	}
	var v trajectory.LateVerdict
	if !decodeBody(w, r, s.cfg.MaxBodyBytes, &v, false) {
		return
	}
	if v.Step < 1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("field \"step\": %d: give the step (the tool call's number, from 1) that ran unconfirmed", v.Step))
		return
	}
	err := s.cfg.Store.RecordVerdict(r.Context(), id, v)
	switch {
	case errors.Is(err, trajectory.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("episode %q has no trajectory: GET /v1/episodes?all=1 lists them", id))
	case errors.Is(err, trajectory.ErrRunning):
		writeError(w, http.StatusConflict, fmt.Sprintf("episode %s has not ended: its judge decides its steps while it runs; post a late verdict after its end", id))
	case errors.Is(err, trajectory.ErrNotUnconfirmed):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("step %d of episode %s did not run unconfirmed: only a flagged step no judge decided takes a late verdict (its decision event and tool step say unconfirmed)", v.Step, id))
	case errors.Is(err, trajectory.ErrDecided):
		writeError(w, http.StatusConflict, fmt.Sprintf("step %d of episode %s already has a late verdict: the first stands", v.Step, id))
	case err != nil:
		writeError(w, http.StatusInternalServerError, "recording the verdict: "+err.Error())
	default:
		s.log.Info("late verdict recorded", "episode_id", id, "step", v.Step, "hack", v.Hack, "judge", v.Judge)
		writeJSON(w, http.StatusCreated, VerdictResponse{EpisodeID: id, LateVerdict: v})
	}
}
