package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/trajectory"
)

// ForkRequest is the body of POST /v1/episodes/{id}/fork.
type ForkRequest struct {
	// N is how many episodes to fork off (1 to sandbox.MaxFork).
	N int `json:"n"`
}

// ForkResponse answers POST /v1/episodes/{id}/fork: the children, each
// with its own token (acting on that child only) and URLs, as
// POST /v1/episodes answers for one episode. ForkGroupID is the group of
// the episodes forked off this parent at this step
// (trajectory.ForkOrigin.GroupID): their samples carry it.
type ForkResponse struct {
	ParentEpisodeID string           `json:"parent_episode_id"`
	BranchStep      int              `json:"branch_step"`
	ForkGroupID     string           `json:"fork_group_id"`
	Episodes        []CreateResponse `json:"episodes"`
}

// handleFork forks a running episode (harness.Episode.Fork): the parent's
// own token or the admin token may; the parent goes on.
func (s *Server) handleFork(w http.ResponseWriter, r *http.Request, c caller) {
	se, ok := s.episodeFor(w, r, c)
	if !ok {
		return
	}
	var req ForkRequest
	if !decodeBody(w, r, s.cfg.MaxBodyBytes, &req, false) {
		return
	}
	if req.N < 1 || req.N > sandbox.MaxFork {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("field \"n\": %d children: give 1 to %d", req.N, sandbox.MaxFork))
		return
	}
	if st, _ := se.getState(); st != StateRunning {
		writeError(w, http.StatusConflict, fmt.Sprintf("episode %s is %s: only a running episode can fork", se.id, st))
		return
	}
	f, ok := se.ep.(forker)
	if !ok {
		writeError(w, http.StatusNotImplemented, fmt.Sprintf("episode %s cannot fork: its runner does not support forking", se.id))
		return
	}
	// The request ids the children inherit: the calls of the prefix.
	// Taken before the fork, so a call the parent takes meanwhile is
	// none of theirs.
	var prefix requests
	prefix.inherit(&se.reqs)
	kids, err := f.Fork(r.Context(), req.N)
	switch {
	case errors.Is(err, harness.ErrFinished):
		st, _ := se.getState()
		writeError(w, http.StatusConflict, fmt.Sprintf("episode %s is %s: only a running episode can fork", se.id, st))
		return
	case errors.Is(err, harness.ErrStreaming):
		writeError(w, http.StatusConflict, err.Error())
		return
	case errors.Is(err, sandbox.ErrUnsupported):
		writeError(w, http.StatusNotImplemented, err.Error())
		return
	case errors.Is(err, context.Canceled):
		writeError(w, 499, "request cancelled")
		return
	case err != nil:
		s.log.Warn("fork failed", "episode_id", se.id, "err", err)
		writeError(w, http.StatusBadGateway, "forking failed (sandbox or recording): "+err.Error())
		return
	}
	t := se.task
	resp := ForkResponse{ParentEpisodeID: se.id, Episodes: make([]CreateResponse, 0, len(kids))}
	_, resp.BranchStep = kids[0].Parent()
	resp.ForkGroupID = trajectory.ForkOrigin{ParentEpisodeID: se.id, BranchStep: resp.BranchStep}.GroupID()
	base := s.baseURL(r)
	for i, k := range kids {
		ks, err := s.register(r.Context(), k, se.taskID, se.groupID, &prefix)
		if err != nil {
			for _, rest := range kids[i+1:] {
				_ = rest.Close(context.WithoutCancel(r.Context()))
			}
			writeError(w, http.StatusServiceUnavailable, "gateway shutting down: retry against another instance")
			return
		}
		s.log.Info("episode forked", "episode_id", ks.id, "parent_episode_id", se.id, "branch_step", resp.BranchStep)
		resp.Episodes = append(resp.Episodes, created(ks, t, base))
	}
	writeJSON(w, http.StatusCreated, resp)
}
