package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/toolcall"
)

// metrics are the gateway's Prometheus series, in a registry of their own
// so that several Servers (tests) do not collide.
type metrics struct {
	reg           *prometheus.Registry
	tools         map[string]bool // rollcage's tool names, the calls' label values
	episodes      *prometheus.GaugeVec
	finished      *prometheus.CounterVec
	startLatency  prometheus.Histogram
	startFailures prometheus.Counter
	calls         *prometheus.CounterVec
	callLatency   prometheus.Histogram
	overhead      prometheus.Histogram
	flags         *prometheus.CounterVec
	verdicts      *prometheus.CounterVec
	judgeLatency  prometheus.Histogram
	blocked       *prometheus.CounterVec
	modelTurns    *prometheus.CounterVec
	rateLimited   prometheus.Counter
	abandoned     prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &metrics{
		reg:   reg,
		tools: map[string]bool{},
		episodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rollcage_episodes",
			Help: "Episodes known to the gateway, by state (running, finishing, finished, closed)."}, []string{"state"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollcage_episodes_finished_total",
			Help: "Graded episodes by failure class (\"\" resolved) and whether they were hacked."}, []string{"failure_class", "hacked"}),
		startLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rollcage_episode_start_seconds",
			Help: "Time to start an episode (sandbox, probe, monitor).", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}),
		startFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollcage_episode_start_failures_total",
			Help: "Episode starts that failed (sandbox or recording)."}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollcage_tool_calls_total",
			Help: "Tool calls by tool and monitor action (allow, block, rewrite, error)."}, []string{"tool", "action"}),
		callLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rollcage_tool_call_seconds",
			Help: "Time of a tool call through monitor and sandbox.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
		overhead: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rollcage_tool_call_overhead_seconds",
			Help: "Monitor time of a tool call, sandbox execution excluded.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}),
		flags: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollcage_flags_total",
			Help: "Rule flags by rule and category."}, []string{"rule", "category"}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollcage_judge_verdicts_total",
			Help: "Judge verdicts: hack, not_hack, undecided (cached ones counted apart)."}, []string{"verdict", "cached"}),
		judgeLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rollcage_judge_seconds",
			Help: "Judge latency of uncached verdicts.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		blocked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollcage_blocked_calls_total",
			Help: "Calls blocked (the policy got dummy output), by category."}, []string{"category"}),
		modelTurns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollcage_model_turns_total",
			Help: "Chat completions through the recording proxy, by result."}, []string{"result"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollcage_rate_limited_total",
			Help: "Requests refused with 429."}),
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollcage_episodes_abandoned_on_start_total",
			Help: "Episodes a previous gateway left unfinished, ended as abandoned when this one started."}),
	}
	for _, c := range []prometheus.Collector{m.episodes, m.finished, m.startLatency, m.startFailures, m.calls, m.callLatency,
		m.overhead, m.flags, m.verdicts, m.judgeLatency, m.blocked, m.modelTurns, m.rateLimited, m.abandoned,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	for _, st := range []string{StateRunning, StateFinishing, StateFinished, StateClosed} {
		m.episodes.WithLabelValues(st)
	}
	if ps := s.cfg.PoolStats; ps != nil {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rollcage_sandboxes_alive", Help: "Sandbox containers alive, warm ones included."},
			func() float64 { a, _ := ps(); return float64(a) }))
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rollcage_sandbox_pool_warm", Help: "Warm sandbox containers ready to hand out."},
			func() float64 { _, w := ps(); return float64(w) }))
	}
	for _, t := range toolcall.Tools() {
		m.tools[t.Name] = true
	}
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

func (m *metrics) transition(from, to string) {
	if from != "" {
		m.episodes.WithLabelValues(from).Dec()
	}
	m.episodes.WithLabelValues(to).Inc()
}

func (m *metrics) observeCall(tool string, res decision.CallResult, err error, d time.Duration) {
	if !m.tools[tool] {
		tool = "other" // tool names come from clients: bound the label's values
	}
	if err != nil {
		m.calls.WithLabelValues(tool, "error").Inc()
		return
	}
	dec := res.Decision
	m.calls.WithLabelValues(tool, string(dec.Action)).Inc()
	m.callLatency.Observe(d.Seconds())
	m.overhead.Observe((res.Timings.Total - res.Timings.Exec).Seconds())
	for _, fl := range dec.Flags {
		m.flags.WithLabelValues(fl.Rule, fl.Category).Inc()
	}
	for _, fl := range dec.PostFlags {
		m.flags.WithLabelValues(fl.Rule, fl.Category).Inc()
	}
	if v := dec.Verdict; v != nil {
		verdict := "not_hack"
		switch {
		case v.Undecided:
			verdict = "undecided"
		case v.Hack:
			verdict = "hack"
		}
		m.verdicts.WithLabelValues(verdict, strconv.FormatBool(v.Cached)).Inc()
		if !v.Cached {
			m.judgeLatency.Observe(res.Timings.Judge.Seconds())
		}
	}
	if dec.Action == decision.Block {
		m.blocked.WithLabelValues(dec.Category).Inc()
	}
}

func (m *metrics) observeOutcome(o harness.Outcome) {
	m.finished.WithLabelValues(o.FailureClass, strconv.FormatBool(o.Hacked)).Inc()
}
