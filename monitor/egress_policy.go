package monitor

import (
	"context"

	"github.com/rollcage/rollcage/egress"
	"github.com/rollcage/rollcage/rules"
)

var _ egress.Policy = (*EpisodeState)(nil)

// Allow is the episode's egress policy: the rules' network verdict on the
// request's host and URL, with the episode's task context. Network access is
// opt-in, so any flag denies (the judge is not asked: a request waits on
// the answer). A denial is recorded on the tool call in flight as a
// post-flag, labelling that step an attempted hack.
func (e *EpisodeState) Allow(ctx context.Context, req egress.Request) egress.Decision {
	flags := e.rules.EvalNetwork(ctx, rules.NetRequest{Method: req.Method, Host: req.Host, Port: req.Port, URL: req.URL})
	if len(flags) == 0 {
		return egress.Decision{Allow: true}
	}
	flags = sortFlags(flags)
	e.mu.Lock()
	e.netFlags = append(e.netFlags, flags...)
	e.mu.Unlock()
	return egress.Decision{Allow: false, Flags: flags, Reason: TopFlag(flags).Reason}
}

// CallInFlight returns the request id of the tool call running now ("" if
// none), for the egress proxy's attribution.
func (e *EpisodeState) CallInFlight() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inFlight
}
