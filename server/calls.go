package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/toolcall"
)

// maxRequestIDs bounds the request ids an episode remembers.
const maxRequestIDs = 4096

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

func callKey(call toolcall.Call) [32]byte {
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
func (q *requests) do(call toolcall.Call, run func() (CallResponse, error)) (CallResponse, error) {
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

// inherit copies into q, a fork child's, the calls of from that have
// answered: they are the child's history too, so a retry there gets the
// same answer and their ids are refused for a different call.
func (q *requests) inherit(from *requests) {
	from.mu.Lock()
	defer from.mu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.byID == nil {
		q.byID = map[string]*callRecord{}
	}
	for _, id := range from.order {
		rec, ok := from.byID[id]
		if !ok {
			continue
		}
		select {
		case <-rec.done:
		default:
			continue // still running: not in the prefix
		}
		if rec.ok {
			q.byID[id] = rec // answered: never written again
			q.order = append(q.order, id)
		}
	}
}

// runCall is one tool call of the API or MCP, deduplicated by request
// id, through the episode, checked (harness.Checked: foreign tool names
// mapped, arguments that cannot run refused). code is 409 for a reused
// request id and 400 for such arguments, whose error is then the one line
// naming the field.
func (s *Server) runCall(ctx context.Context, se *session, call toolcall.Call) (CallResponse, int, error) {
	resp, err := se.reqs.do(call, func() (CallResponse, error) {
		res, o, err := s.call(ctx, se, call, harness.Checked())
		if err != nil {
			return CallResponse{}, err
		}
		return CallResponse{Step: res.Step, Output: res.Output, ExitCode: res.ExitCode, Dummy: res.Dummy,
			Decision: res.Decision, Timings: res.Timings, Submitted: res.Submit, Outcome: o}, nil
	})
	var bad *toolcall.ArgsError
	switch {
	case errors.As(err, &bad):
		return resp, http.StatusBadRequest, bad
	case errors.As(err, new(errReusedID)):
		return resp, http.StatusConflict, err
	}
	return resp, 0, err
}
