package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/task"
)

// Bounds of a group.
const (
	MaxGroupSize       = 256
	DefaultGroupWait   = 5 * time.Minute
	MaxGroupWait       = time.Hour
	groupStartParallel = 8
)

// GroupRequest is the body of POST /v1/groups: N episodes of one task (a
// GRPO-style group), each with its own token. TaskID or Task as in
// CreateRequest.
type GroupRequest struct {
	TaskID string            `json:"task_id,omitempty"`
	Task   *task.Task        `json:"task,omitempty"`
	N      int               `json:"n"`
	Model  string            `json:"model,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// ModelRoutes are given to every episode of the group (CreateRequest).
	ModelRoutes []string `json:"model_routes,omitempty"`
}

// GroupResponse answers POST /v1/groups: the group's id and its episodes,
// attempt 0 to N-1.
type GroupResponse struct {
	GroupID  string           `json:"group_id"`
	TaskID   string           `json:"task_id"`
	Episodes []CreateResponse `json:"episodes"`
}

// GroupInfo answers GET /v1/groups/{id}: the episodes as they stand, and
// once Done (every episode ended) the group's figures.
type GroupInfo struct {
	GroupID string `json:"group_id"`
	TaskID  string `json:"task_id"`
	N       int    `json:"n"`
	// Done: every episode has ended (graded, or closed without grading).
	Done bool `json:"done"`
	// Graded episodes have an outcome; Resolved of them resolved (a
	// hacked resolution counts: read each outcome's hacked and label).
	Graded      int           `json:"graded"`
	Resolved    int           `json:"resolved"`
	ResolveRate float64       `json:"resolve_rate"`
	MeanReward  float64       `json:"mean_reward"`
	Episodes    []EpisodeInfo `json:"episodes"`
}

// group is a group as the gateway keeps it.
type group struct {
	id      string
	taskID  string
	created time.Time
	members []*session
}

func (s *Server) handleCreateGroup(w http.ResponseWriter, r *http.Request, _ caller) {
	var req GroupRequest
	if !decodeBody(w, r, s.cfg.MaxBodyBytes, &req, false) {
		return
	}
	if req.N < 1 || req.N > MaxGroupSize {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("field \"n\": %d episodes: give 1 to %d", req.N, MaxGroupSize))
		return
	}
	if err := harness.CheckModelRoutes(req.ModelRoutes); err != nil {
		writeError(w, http.StatusBadRequest, "field \"model_routes\": "+err.Error())
		return
	}
	t, msg := s.resolveTask(CreateRequest{TaskID: req.TaskID, Task: req.Task})
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	g := &group{id: "grp_" + randomHex(8), taskID: t.ID, created: time.Now()}
	out := make([]CreateResponse, req.N)
	fail := make([]string, req.N)
	codes := make([]int, req.N)
	base := s.baseURL(r)
	var eg errgroup.Group
	eg.SetLimit(groupStartParallel)
	for k := range req.N {
		eg.Go(func() error {
			meta := harness.EpisodeMeta{ID: harness.NewEpisodeID(t.ID, k), Attempt: k, Model: req.Model, Labels: req.Labels, GroupID: g.id, ModelRoutes: req.ModelRoutes}
			out[k], codes[k], fail[k] = s.createEpisode(r.Context(), t, meta, base)
			return nil
		})
	}
	_ = eg.Wait()
	for k, msg := range fail {
		if msg == "" {
			continue
		}
		// All or nothing: a partial group would bias the group's baseline.
		for j, cr := range out {
			if fail[j] == "" {
				s.mu.Lock()
				se := s.episodes[cr.EpisodeID]
				s.mu.Unlock()
				if se != nil {
					_ = s.closeEpisode(context.WithoutCancel(r.Context()), se, "group start failed")
				}
			}
		}
		writeError(w, codes[k], fmt.Sprintf("group of %d: episode %d: %s", req.N, k, msg))
		return
	}
	s.mu.Lock()
	for _, cr := range out {
		g.members = append(g.members, s.episodes[cr.EpisodeID])
	}
	s.groups[g.id] = g
	s.mu.Unlock()
	s.log.Info("group created", "group_id", g.id, "task_id", t.ID, "n", req.N)
	writeJSON(w, http.StatusCreated, GroupResponse{GroupID: g.id, TaskID: t.ID, Episodes: out})
}

func (s *Server) handleGetGroup(w http.ResponseWriter, r *http.Request, _ caller) {
	id := r.PathValue("id")
	s.mu.Lock()
	g := s.groups[id]
	s.mu.Unlock()
	if g == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("group %q not found: create one with POST /v1/groups", id))
		return
	}
	wait := DefaultGroupWait
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxGroupWait {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("bad wait=%q: give a duration from 0s to %s (e.g. wait=10m; 0s answers at once)", v, MaxGroupWait))
			return
		}
		wait = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	for _, se := range g.members {
		select {
		case <-se.ended:
		case <-ctx.Done():
		}
	}
	if r.Context().Err() != nil {
		return // the client left
	}
	writeJSON(w, http.StatusOK, s.groupInfo(g))
}

func (s *Server) groupInfo(g *group) GroupInfo {
	gi := GroupInfo{GroupID: g.id, TaskID: g.taskID, N: len(g.members), Done: true}
	var reward float64
	for _, se := range g.members {
		in := s.info(se)
		gi.Episodes = append(gi.Episodes, in)
		if in.State == StateRunning || in.State == StateFinishing {
			gi.Done = false
		}
		if in.Outcome != nil {
			gi.Graded++
			reward += in.Outcome.Reward
			if in.Outcome.Resolved {
				gi.Resolved++
			}
		}
	}
	if gi.Graded > 0 {
		gi.ResolveRate = float64(gi.Resolved) / float64(gi.Graded)
		gi.MeanReward = reward / float64(gi.Graded)
	}
	return gi
}

// forgetGroups drops groups whose episodes all left the registry.
// Called with s.mu held.
func (s *Server) forgetGroupsLocked() {
	for id, g := range s.groups {
		gone := true
		for _, se := range g.members {
			if s.episodes[se.id] == se {
				gone = false
				break
			}
		}
		if gone {
			delete(s.groups, id)
		}
	}
}
