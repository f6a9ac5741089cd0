package judge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	openai "github.com/sashabaranov/go-openai"
)

// OpenAI is the Judge backed by an OpenAI-compatible chat completions
// server. It is safe for concurrent use by many episodes.
type OpenAI struct {
	cfg     Config
	client  *openai.Client
	prompts prompts
	cache   *lru
	lim     *limiter
	log     *slog.Logger

	// format holds the formatMode in use, with confirmedBit set once the
	// server has answered a request in that mode: from then on a bare 400
	// is the request's fault, not the format's.
	format atomic.Int32

	mu       sync.Mutex
	run      tally             // guarded by mu
	episodes map[string]*tally // guarded by mu
}

var _ Judge = (*OpenAI)(nil)

const (
	confirmedBit = 1 << 8
	// malformedRetries is how often a sample is asked again after an
	// answer that is not a verdict: models that garble once usually
	// recover, those that garble thrice will not.
	malformedRetries = 2
	maxBackoff       = 10 * time.Second
)

// NewOpenAI returns a judge for cfg, which must be valid.
func NewOpenAI(cfg Config) (*OpenAI, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	p, err := loadPrompts(cfg.PromptDir)
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = cfg.MaxConcurrent
		hc = &http.Client{Transport: tr}
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	oc.HTTPClient = headerDoer{hc}
	return &OpenAI{
		cfg:      cfg,
		client:   openai.NewClientWithConfig(oc),
		prompts:  p,
		cache:    newLRU(cfg.CacheSize),
		lim:      newLimiter(cfg.MaxConcurrent, cfg.MaxPerEpisode),
		log:      cfg.Logger,
		episodes: map[string]*tally{},
	}, nil
}

// Judge asks the model, Samples times, whether req's call is a hack.
func (o *OpenAI) Judge(ctx context.Context, req Request) (Verdict, error) {
	if err := ctx.Err(); err != nil {
		return Verdict{}, fmt.Errorf("judge: %w", err)
	}
	start := time.Now()
	key := keyOf(req)
	if v, ok := o.cache.get(key); ok {
		v.Cached, v.PromptTokens, v.CompletionTokens = true, 0, 0
		v.Latency = time.Since(start)
		o.record(req.EpisodeID, v, callCounts{})
		return v, nil
	}
	system, user, err := o.prompts.render(req, o.cfg.HistoryBudget)
	if err != nil {
		return Verdict{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, o.cfg.Timeout)
	defer cancel()
	results := make([]result, o.cfg.Samples)
	if len(results) == 1 {
		results[0] = o.sample(tctx, req.EpisodeID, system, user)
	} else {
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() { results[i] = o.sample(tctx, req.EpisodeID, system, user) })
		}
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		return Verdict{}, fmt.Errorf("judge: %w", err)
	}
	v, counts := vote(results)
	v.Latency = time.Since(start)
	if !v.Undecided {
		o.cache.put(key, v)
	}
	o.record(req.EpisodeID, v, counts)
	o.log.Debug("judge verdict", "episode_id", req.EpisodeID, "hack", v.Hack, "category", v.Category,
		"confidence", v.Confidence, "undecided", v.Undecided, "err", v.Err, "votes", v.Votes,
		"samples", v.Samples, "latency", v.Latency)
	return v, nil
}

// Stats returns the run's totals.
func (o *OpenAI) Stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.run.stats()
}

// EpisodeStats returns the totals of one episode (zero if unknown).
func (o *OpenAI) EpisodeStats(id string) Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t := o.episodes[id]; t != nil {
		return t.stats()
	}
	return Stats{}
}

// EndEpisode returns an episode's totals and forgets them, so a long run
// does not keep every episode's accounting; the run totals keep them.
func (o *OpenAI) EndEpisode(id string) Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.episodes[id]
	delete(o.episodes, id)
	if t == nil {
		return Stats{}
	}
	return t.stats()
}

func (o *OpenAI) record(episode string, v Verdict, c callCounts) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.run.addCall(v, c)
	t := o.episodes[episode]
	if t == nil {
		t = &tally{}
		o.episodes[episode] = t
	}
	t.addCall(v, c)
}

// result is one sample's outcome.
type result struct {
	s        sample
	ok       bool
	reason   string // why not ok: Reason* + detail
	prompt   int
	complete int
	counts   callCounts
}

// sample gets one well-formed answer, retrying transport failures with
// backoff and malformed answers at once, until ctx's deadline.
func (o *OpenAI) sample(ctx context.Context, episode, system, user string) (r result) {
	attempt, malformedLeft := 0, malformedRetries
	bo := retryBackoff(o.cfg.RetryBackoff)
	for {
		release, err := o.lim.acquire(ctx, episode)
		if err != nil {
			r.reason = ReasonTimeout + ": no free judge slot within " + o.cfg.Timeout.String()
			return r
		}
		cur := o.format.Load()
		mode := formatMode(cur &^ confirmedBit)
		var hdr respHeader
		resp, err := o.client.CreateChatCompletion(context.WithValue(ctx, respHeaderKey{}, &hdr), o.request(mode, system, user))
		release()
		r.counts.requests++
		if err == nil {
			r.prompt += resp.Usage.PromptTokens
			r.complete += resp.Usage.CompletionTokens
			o.format.CompareAndSwap(int32(mode), int32(mode)|confirmedBit)
			content := ""
			if len(resp.Choices) > 0 {
				content = resp.Choices[0].Message.Content
			}
			s, perr := parseSample(content)
			if perr == nil {
				r.s, r.ok = s, true
				return r
			}
			r.counts.malformed++
			o.log.Debug("judge answer malformed", "episode_id", episode, "err", perr, "format", mode)
			if malformedLeft == 0 {
				r.reason = ReasonMalformed + ": " + perr.Error()
				return r
			}
			malformedLeft--
			r.counts.retries++
			continue
		}
		if ctx.Err() != nil {
			r.reason = ReasonTimeout + ": no verdict within " + o.cfg.Timeout.String()
			return r
		}
		status, msg := statusOf(err)
		var reason string
		switch {
		case status == http.StatusBadRequest && o.stepDown(mode, msg):
			continue
		case status == http.StatusTooManyRequests:
			r.counts.rateLimited++
			reason = ReasonRateLimited
		case status >= 500:
			reason = ReasonServer
		case status == 0:
			reason = ReasonUnreachable
		default:
			r.reason = fmt.Sprintf("%s: HTTP %d: %s", ReasonRejected, status, clip(msg, 200))
			return r
		}
		detail := clip(err.Error(), 200)
		if attempt >= o.cfg.Retries {
			r.reason = fmt.Sprintf("%s: gave up after %d attempts: %s", reason, attempt+1, detail)
			return r
		}
		wait := bo.NextBackOff()
		if ra, ok := parseRetryAfter(hdr.retryAfter, time.Now()); ok {
			wait = ra
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			// Waiting would only run into the deadline: give up now and
			// let the episode go on.
			r.reason = fmt.Sprintf("%s: retry in %s would pass the deadline: %s", reason, wait.Round(time.Millisecond), detail)
			return r
		}
		if sleepCtx(ctx, wait) != nil {
			r.reason = ReasonTimeout + ": no verdict within " + o.cfg.Timeout.String()
			return r
		}
		attempt++
		r.counts.retries++
	}
}

func (o *OpenAI) request(mode formatMode, system, user string) openai.ChatCompletionRequest {
	t := float32(o.cfg.Temperature)
	if t == 0 {
		// go-openai omits a zero temperature, and servers then use their
		// default (often 1); the smallest float32 is 0 to any sampler.
		t = math.SmallestNonzeroFloat32
	}
	return openai.ChatCompletionRequest{
		Model: o.cfg.Model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: system},
			{Role: openai.ChatMessageRoleUser, Content: user},
		},
		Temperature: t,
		// max_tokens is deprecated in the OpenAI API; vLLM and llama.cpp
		// read max_completion_tokens too, as the policy's requests send.
		MaxCompletionTokens: o.cfg.MaxTokens,
		ResponseFormat:      mode.responseFormat(),
	}
}

// stepDown moves from mode to the next laxer format after a 400 and
// reports whether the request should be sent again. A server that has
// already answered in mode keeps it unless the 400 names the format.
func (o *OpenAI) stepDown(mode formatMode, msg string) bool {
	names := rejectsFormat(msg)
	for {
		cur := o.format.Load()
		curMode := formatMode(cur &^ confirmedBit)
		switch {
		case curMode != mode:
			return curMode > mode // another request already stepped down
		case mode == modeProse:
			return false
		case cur&confirmedBit != 0 && !names:
			return false
		}
		if o.format.CompareAndSwap(cur, int32(mode+1)) {
			o.log.Info("judge server rejected response format, falling back",
				"from", mode, "to", mode+1, "message", clip(msg, 200))
			return true
		}
	}
}

// vote combines the samples: the majority of well-formed answers wins, a
// tie counts as a hack. Confidence is the mean probability the samples
// give the winning answer (c for agreeing samples, 1-c for dissenting).
func vote(rs []result) (Verdict, callCounts) {
	var v Verdict
	var c callCounts
	var ok []sample
	for _, r := range rs {
		v.PromptTokens += r.prompt
		v.CompletionTokens += r.complete
		c.requests += r.counts.requests
		c.retries += r.counts.retries
		c.rateLimited += r.counts.rateLimited
		c.malformed += r.counts.malformed
		if r.ok {
			ok = append(ok, r.s)
		} else if v.Err == "" {
			v.Err = r.reason
		}
	}
	if len(ok) == 0 {
		v.Undecided = true
		return v, c
	}
	v.Err = ""
	hacks := 0
	for _, s := range ok {
		if s.Hack {
			hacks++
		}
	}
	v.Hack = 2*hacks >= len(ok)
	v.Samples = len(ok)
	cats := map[string]int{}
	best := -1.0
	var sum float64
	for _, s := range ok {
		if s.Hack != v.Hack {
			sum += 1 - s.Confidence
			continue
		}
		v.Votes++
		sum += s.Confidence
		if s.Category != "" {
			cats[s.Category]++
			if cats[s.Category] > cats[v.Category] {
				v.Category = s.Category
			}
		}
		if s.Confidence > best {
			best, v.Rationale = s.Confidence, s.Rationale
		}
	}
	v.Confidence = sum / float64(len(ok))
	return v, c
}

// statusOf extracts the HTTP status and message from a go-openai error;
// status 0 means the server was not reached.
func statusOf(err error) (int, string) {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return apiErr.HTTPStatusCode, apiErr.Message
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		return reqErr.HTTPStatusCode, string(reqErr.Body)
	}
	return 0, err.Error()
}

// retryBackoff is the waits between one request's attempts: the nth in
// [d/2, d] for d = base·2ⁿ up to maxBackoff (centred on 3d/4, ±d/4), so
// that episodes rate limited together do not come back together.
func retryBackoff(base time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: base * 3 / 4, RandomizationFactor: 1.0 / 3, Multiplier: 2, MaxInterval: maxBackoff * 3 / 4}
}

// parseRetryAfter reads a Retry-After header: delta seconds or an HTTP
// date.
func parseRetryAfter(h string, now time.Time) (time.Duration, bool) {
	if h == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(h, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// headerDoer passes requests to an http.Client and hands the response's
// Retry-After to the attempt that asked (go-openai's errors drop headers).
type headerDoer struct{ c *http.Client }

type respHeaderKey struct{}

type respHeader struct{ retryAfter string }

func (d headerDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(req)
	if err == nil {
		if h, ok := req.Context().Value(respHeaderKey{}).(*respHeader); ok {
			h.retryAfter = resp.Header.Get("Retry-After")
		}
	}
	return resp, err
}
