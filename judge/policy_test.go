package judge

import (
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSampler(t *testing.T) {
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = fmt.Sprintf("ep-%d/call-%d", i/50, i%50)
	}
	count := func(s Sampler) (n int, picked []bool) {
		picked = make([]bool, len(ids))
		for i, id := range ids {
			if s.Sample(id) {
				picked[i] = true
				n++
			}
		}
		return n, picked
	}
	if n, _ := count(Sampler{}); n != 0 {
		t.Errorf("zero Sampler audited %d calls, want none", n)
	}
	if n, _ := count(Sampler{Rate: 1}); n != len(ids) {
		t.Errorf("rate 1 audited %d of %d", n, len(ids))
	}
	for _, rate := range []float64{0.01, 0.1, 0.5} {
		n, a := count(Sampler{Rate: rate, Seed: 7})
		if got := float64(n) / float64(len(ids)); got < rate*0.85-0.002 || got > rate*1.15+0.002 {
			t.Errorf("rate %v: audited fraction %v", rate, got)
		}
		_, b := count(Sampler{Rate: rate, Seed: 7})
		if !slices.Equal(a, b) {
			t.Errorf("rate %v: same seed, different choice", rate)
		}
		_, c := count(Sampler{Rate: rate, Seed: 8})
		if slices.Equal(a, c) {
			t.Errorf("rate %v: another seed made the same choice", rate)
		}
	}
}

func TestParseFailPolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    FailPolicy
		wantErr string
	}{
		{"", DefaultFailPolicy, ""},
		{"certain=block,suspicious=allow", FailPolicy{FailBlock, FailAllow}, ""},
		{" suspicious = block ", FailPolicy{FailBlock, FailBlock}, ""},
		{"certain=allow_unconfirmed", FailPolicy{FailAllowUnconfirmed, FailAllowUnconfirmed}, ""},
		{"certain=deny", FailPolicy{}, "unknown mode"},
		{"sure=block", FailPolicy{}, "unknown severity"},
		{"block", FailPolicy{}, "not severity=mode"},
	}
	for _, tc := range tests {
		got, err := ParseFailPolicy(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseFailPolicy(%q) err = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseFailPolicy(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseFailPolicy(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if back, err := ParseFailPolicy(got.String()); err != nil || back != got {
			t.Errorf("round trip of %v: %v, %v", got, back, err)
		}
	}
	if DefaultFailPolicy.For("certain") != FailBlock || DefaultFailPolicy.For("suspicious") != FailAllowUnconfirmed || DefaultFailPolicy.For("weird") != FailBlock {
		t.Errorf("DefaultFailPolicy.For is wrong")
	}
	p := DefaultFailPolicy
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Var(&p, "judge-fail", "")
	if err := fs.Parse([]string{"-judge-fail", "suspicious=block"}); err != nil || p.Suspicious != FailBlock || p.Certain != FailBlock {
		t.Errorf("as a flag: %+v, %v", p, err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{BaseURL: "http://127.0.0.1:8000/v1", Model: "m"}
	tests := []struct {
		name string
		mod  func(*Config)
		want string // "" for valid
	}{
		{"minimal", func(*Config) {}, ""},
		{"no url", func(c *Config) { c.BaseURL = "" }, "ROLLCAGE_JUDGE_URL"},
		{"not http", func(c *Config) { c.BaseURL = "127.0.0.1:8000" }, "not an http(s) URL"},
		{"no model", func(c *Config) { c.Model = "" }, "ROLLCAGE_JUDGE_MODEL"},
		{"negative samples", func(c *Config) { c.Samples = -1 }, "Samples"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "Timeout"},
		{"hot", func(c *Config) { c.Temperature = 3 }, "Temperature"},
		{"missing prompt dir", func(c *Config) { c.PromptDir = "/nonexistent/prompts" }, "PromptDir"},
		{"negative cache disables", func(c *Config) { c.CacheSize = -1; c.Retries = -1; c.HistoryBudget = -1 }, ""},
	}
	for _, tc := range tests {
		c := ok
		tc.mod(&c)
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want one mentioning %s", tc.name, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "\n"):
			t.Errorf("%s: error spans lines: %q", tc.name, err)
		}
	}
	if _, err := NewOpenAI(Config{}); err == nil {
		t.Errorf("NewOpenAI(Config{}) succeeded")
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("ROLLCAGE_JUDGE_URL", "http://127.0.0.1:9/v1")
	t.Setenv("ROLLCAGE_JUDGE_MODEL", "qwen")
	t.Setenv("ROLLCAGE_JUDGE_API_KEY", "k")
	want := Config{BaseURL: "http://127.0.0.1:9/v1", Model: "qwen", APIKey: "k"}
	if diff := cmp.Diff(want, ConfigFromEnv(), cmp.Comparer(func(a, b Config) bool {
		return a.BaseURL == b.BaseURL && a.Model == b.Model && a.APIKey == b.APIKey
	})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"3", 3 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{now.Add(7 * time.Second).Format(http.TimeFormat), 7 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"soon", 0, false},
	}
	for _, tc := range tests {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * 10 * time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.9, 900 * time.Millisecond}, {0.99, 990 * time.Millisecond}} {
		got := h.quantile(tc.q)
		if got < tc.want || float64(got) > float64(tc.want)*bucketRatio {
			t.Errorf("quantile(%v) = %v, want within one bucket above %v", tc.q, got, tc.want)
		}
	}
	if h.quantile(1) != time.Second || h.max != time.Second {
		t.Errorf("quantile(1) = %v, max %v; want 1s", h.quantile(1), h.max)
	}
}
