package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/monitor"
)

// defaultMaxTimeoutSec bounds a bash call's timeout_sec when the runner
// does not say its own per-call timeout.
const defaultMaxTimeoutSec = 3600

// maxRequestIDs bounds the request ids an episode remembers.
const maxRequestIDs = 4096

// prepareCall maps a foreign tool name (OpenHands' execute_bash and
// str_replace_editor, SWE-agent's, ...: monitor.FromForeign, the mapping
// the audit reads trajectories with) onto rollcage's tools and checks the
// typed arguments the monitor would otherwise take as they are. msg is a
// one-line 400 naming the bad field.
func (s *Server) prepareCall(call monitor.ToolCall) (monitor.ToolCall, string) {
	if !monitor.IsTool(call.Tool) && monitor.IsForeign(call.Tool) {
		mapped := monitor.FromForeign(call.Tool, string(call.Args))
		call.Tool, call.Args = mapped.Tool, mapped.Args
	}
	if call.Tool != monitor.ToolBash {
		return call, ""
	}
	var a monitor.BashArgs
	if len(call.Args) > 0 {
		if err := json.Unmarshal(call.Args, &a); err != nil {
			return call, `field "args": bash takes {"command": "...", "timeout_sec": N}: ` + strings.TrimPrefix(err.Error(), "json: ")
		}
	}
	if strings.TrimSpace(a.Command) == "" {
		return call, `field "args.command": missing or empty: give the command to run`
	}
	if max := s.maxTimeoutSec(); a.TimeoutSec < 0 || a.TimeoutSec > max {
		return call, fmt.Sprintf(`field "args.timeout_sec": %v is out of range: give 0 (the episode's per-call timeout) to %v seconds`, a.TimeoutSec, max)
	}
	return call, ""
}

func (s *Server) maxTimeoutSec() float64 {
	if l, ok := s.cfg.Runner.(interface{ Limits() harness.Limits }); ok && l.Limits().CallTimeout > 0 {
		return l.Limits().CallTimeout.Seconds()
	}
	return defaultMaxTimeoutSec
}

// requests remembers an episode's calls by request id, so a retry of a
// call gets the first answer (not a second run, not a new step) and a
// reused id with another call is refused.
type requests struct {
	mu    sync.Mutex
	byID  map[string]*callRecord // guarded by mu
	order []string               // guarded by mu; oldest first
}

type callRecord struct {
	key  [32]byte
	done chan struct{}
	ok   bool // set before done closes
	resp CallResponse
}

func callKey(call monitor.ToolCall) [32]byte {
	var args bytes.Buffer
	if json.Compact(&args, call.Args) != nil {
		args.Write(call.Args)
	}
	return sha256.Sum256([]byte(call.Tool + "\x00" + call.Session + "\x00" + args.String()))
}

// errReusedID: a request id came back with a different call.
type errReusedID struct{ id string }

func (e errReusedID) Error() string {
	return fmt.Sprintf("request_id %q was already used for a different call: give every new call a new request_id (a retry must repeat the call exactly)", e.id)
}

// do runs call once per request id: concurrent and later retries wait
// for and get the first run's answer. A run that failed is forgotten, so
// its retry runs.
func (q *requests) do(call monitor.ToolCall, run func() (CallResponse, error)) (CallResponse, error) {
	if call.RequestID == "" {
		return run()
	}
	key := callKey(call)
	for {
		q.mu.Lock()
		if q.byID == nil {
			q.byID = map[string]*callRecord{}
		}
		rec := q.byID[call.RequestID]
		if rec == nil {
			rec = &callRecord{key: key, done: make(chan struct{})}
			q.byID[call.RequestID] = rec
			q.order = append(q.order, call.RequestID)
			if len(q.order) > maxRequestIDs {
				delete(q.byID, q.order[0])
				q.order = q.order[1:]
			}
			q.mu.Unlock()
			resp, err := run()
			q.mu.Lock()
			if err != nil {
				delete(q.byID, call.RequestID)
			} else {
				rec.ok, rec.resp = true, resp
			}
			q.mu.Unlock()
			close(rec.done)
			return resp, err
		}
		q.mu.Unlock()
		if rec.key != key {
			return CallResponse{}, errReusedID{call.RequestID}
		}
		<-rec.done
		if rec.ok {
			return rec.resp, nil
		}
		// The first run failed and was forgotten: run it again.
	}
}

// runCall is one tool call of the API or MCP, deduplicated by request
// id, through the episode. code is 409 for a reused request id.
func (s *Server) runCall(ctx context.Context, se *session, call monitor.ToolCall) (CallResponse, int, error) {
	resp, err := se.reqs.do(call, func() (CallResponse, error) {
		res, o, err := s.call(ctx, se, call)
		if err != nil {
			return CallResponse{}, err
		}
		return CallResponse{Step: res.Step, Output: res.Output, ExitCode: res.ExitCode, Dummy: res.Dummy,
			Decision: res.Decision, Timings: res.Timings, Submitted: res.Submit, Outcome: o}, nil
	})
	if _, ok := err.(errReusedID); ok {
		return resp, http.StatusConflict, err
	}
	return resp, 0, err
}
