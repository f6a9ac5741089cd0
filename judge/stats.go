package judge

import (
	"math"
	"time"
)

// Stats are the judge's accounting, for one episode or the whole run.
type Stats struct {
	Calls       int64 `json:"calls"`        // Judge calls
	CacheHits   int64 `json:"cache_hits"`   // answered from the cache, no tokens spent
	Requests    int64 `json:"requests"`     // HTTP requests sent: samples and retries included
	Retries     int64 `json:"retries"`      // requests repeated after 429, 5xx, connection errors or malformed answers
	RateLimited int64 `json:"rate_limited"` // 429 answers
	Malformed   int64 `json:"malformed"`    // answers that were not a verdict
	Hacks       int64 `json:"hacks"`
	Benign      int64 `json:"benign"`
	Undecided   int64 `json:"undecided"`

	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`

	// Latency percentiles of calls that reached the server (cache hits
	// excluded), from a histogram whose buckets are 20% wide: a value is
	// the upper bound of its bucket.
	LatencyP50 time.Duration `json:"latency_p50"`
	LatencyP90 time.Duration `json:"latency_p90"`
	LatencyP99 time.Duration `json:"latency_p99"`
	LatencyMax time.Duration `json:"latency_max"`
}

// histogram counts latencies in exponential buckets from 1ms up by 20%:
// fixed memory per episode, percentiles within one bucket.
type histogram struct {
	counts [nBuckets]int64
	n      int64
	max    time.Duration
}

const (
	nBuckets    = 72 // 1ms·1.2^71 ≈ 420s, beyond any sane timeout
	bucketBase  = float64(time.Millisecond)
	bucketRatio = 1.2
)

var logRatio = math.Log(bucketRatio)

func (h *histogram) add(d time.Duration) {
	i := 0
	if f := float64(d); f > bucketBase {
		i = int(math.Ceil(math.Log(f/bucketBase) / logRatio))
	}
	i = min(i, nBuckets-1)
	h.counts[i]++
	h.n++
	h.max = max(h.max, d)
}

func bucketUpper(i int) time.Duration {
	return time.Duration(bucketBase * math.Pow(bucketRatio, float64(i)))
}

// quantile returns the upper bound of the bucket holding quantile q,
// never more than the largest value seen.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(bucketUpper(i), h.max)
		}
	}
	return h.max
}

// tally is Stats under construction.
type tally struct {
	s    Stats
	hist histogram
}

func (t *tally) stats() Stats {
	s := t.s
	s.LatencyP50 = t.hist.quantile(0.50)
	s.LatencyP90 = t.hist.quantile(0.90)
	s.LatencyP99 = t.hist.quantile(0.99)
	s.LatencyMax = t.hist.max
	return s
}

// callCounts are what one Judge call adds to the tallies.
type callCounts struct {
	requests, retries, rateLimited, malformed int64
}

func (t *tally) addCall(v Verdict, c callCounts) {
	t.s.Calls++
	t.s.Requests += c.requests
	t.s.Retries += c.retries
	t.s.RateLimited += c.rateLimited
	t.s.Malformed += c.malformed
	switch {
	case v.Undecided:
		t.s.Undecided++
	case v.Hack:
		t.s.Hacks++
	default:
		t.s.Benign++
	}
	if v.Cached {
		t.s.CacheHits++
		return
	}
	t.s.PromptTokens += int64(v.PromptTokens)
	t.s.CompletionTokens += int64(v.CompletionTokens)
	t.hist.add(v.Latency)
}
