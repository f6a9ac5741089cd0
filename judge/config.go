package judge

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"
)

// Defaults applied to zero fields of Config.
const (
	DefaultTimeout       = 20 * time.Second
	DefaultRetries       = 3
	DefaultMaxConcurrent = 8
	DefaultMaxPerEpisode = 2
	DefaultCacheSize     = 4096
	DefaultHistoryBudget = 6000
	DefaultRetryBackoff  = 250 * time.Millisecond
	// DefaultVoteTemperature is used when Samples > 1 and Temperature is 0:
	// k samples at temperature 0 would be k copies of one answer.
	DefaultVoteTemperature = 0.7
)

// Config configures the OpenAI-compatible judge. The zero value of every
// field but BaseURL and Model is useful.
type Config struct {
	// BaseURL of the OpenAI-compatible API, including /v1
	// (e.g. http://127.0.0.1:8000/v1). Required.
	BaseURL string
	// Model name the server knows. Required.
	Model  string
	APIKey string

	// Samples is k: the judge asks k times and takes the majority.
	// 0 means 1. A tie (k even) counts as a hack, with the mean
	// confidence of the hack votes: the rules already flagged the call and
	// half the samples confirm it.
	Samples int
	// MaxConcurrent bounds requests in flight to the server across all
	// episodes; 0 means DefaultMaxConcurrent.
	MaxConcurrent int
	// MaxPerEpisode bounds requests in flight for one episode, so one
	// chatty episode cannot starve the rest; 0 means DefaultMaxPerEpisode.
	MaxPerEpisode int
	// Timeout bounds one Judge call end to end: waits for a slot, every
	// sample, every retry. 0 means DefaultTimeout.
	Timeout time.Duration
	// Retries on 429, 5xx and connection errors, with exponential backoff
	// and jitter from RetryBackoff, honouring Retry-After. 0 means
	// DefaultRetries; negative means none.
	Retries      int
	RetryBackoff time.Duration // 0 means DefaultRetryBackoff
	// CacheSize is the number of verdicts kept (LRU, keyed by sorted rule
	// ids, normalized call and task id). 0 means DefaultCacheSize;
	// negative disables the cache.
	CacheSize int
	// HistoryBudget is the characters of rendered history put in the
	// prompt, newest steps kept. 0 means DefaultHistoryBudget; negative
	// means no history.
	HistoryBudget int
	// PromptDir, if set, holds system.tmpl and/or user.tmpl overriding the
	// embedded templates (text/template; see prompts/ for the data).
	PromptDir string
	// Temperature of the samples. 0 means 0 for one sample and
	// DefaultVoteTemperature for several.
	Temperature float64
	// MaxTokens caps the completion; 0 leaves it to the server.
	MaxTokens int
	// HTTPClient overrides the client used; nil means a client with a
	// connection pool sized for MaxConcurrent.
	HTTPClient *http.Client
	Logger     *slog.Logger // nil discards
}

// ConfigFromEnv returns a Config with BaseURL, Model and APIKey from
// ROLLCAGE_JUDGE_URL, ROLLCAGE_JUDGE_MODEL and ROLLCAGE_JUDGE_API_KEY.
func ConfigFromEnv() Config {
	return Config{
		BaseURL: os.Getenv("ROLLCAGE_JUDGE_URL"),
		Model:   os.Getenv("ROLLCAGE_JUDGE_MODEL"),
		APIKey:  os.Getenv("ROLLCAGE_JUDGE_API_KEY"),
	}
}

// ErrConfig is wrapped by every error of Validate.
var ErrConfig = errors.New("judge config")

// Validate reports the first thing wrong with c, in one line saying what
// to do.
func (c Config) Validate() error {
	if c.BaseURL == "" {
		return fmt.Errorf("%w: BaseURL is empty: set ROLLCAGE_JUDGE_URL to the OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1", ErrConfig)
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: BaseURL %q is not an http(s) URL: use e.g. http://127.0.0.1:8000/v1", ErrConfig, c.BaseURL)
	}
	if c.Model == "" {
		return fmt.Errorf("%w: Model is empty: set ROLLCAGE_JUDGE_MODEL to a model the server serves", ErrConfig)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Samples", c.Samples}, {"MaxConcurrent", c.MaxConcurrent}, {"MaxPerEpisode", c.MaxPerEpisode}, {"MaxTokens", c.MaxTokens}} {
		if f.v < 0 {
			return fmt.Errorf("%w: %s is %d: use 0 for the default or a positive number", ErrConfig, f.name, f.v)
		}
	}
	if c.Timeout < 0 || c.RetryBackoff < 0 {
		return fmt.Errorf("%w: Timeout and RetryBackoff must not be negative: use 0 for the defaults", ErrConfig)
	}
	if c.Temperature < 0 || c.Temperature > 2 {
		return fmt.Errorf("%w: Temperature %g is outside [0, 2]", ErrConfig, c.Temperature)
	}
	if c.PromptDir != "" {
		if st, err := os.Stat(c.PromptDir); err != nil || !st.IsDir() {
			return fmt.Errorf("%w: PromptDir %q is not a directory: point it at a directory with system.tmpl and/or user.tmpl", ErrConfig, c.PromptDir)
		}
	}
	return nil
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	c.Samples = cmp.Or(c.Samples, 1)
	c.MaxConcurrent = cmp.Or(c.MaxConcurrent, DefaultMaxConcurrent)
	c.MaxPerEpisode = cmp.Or(c.MaxPerEpisode, DefaultMaxPerEpisode)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Retries = max(cmp.Or(c.Retries, DefaultRetries), 0) // negative: none
	c.RetryBackoff = cmp.Or(c.RetryBackoff, DefaultRetryBackoff)
	c.CacheSize = cmp.Or(c.CacheSize, DefaultCacheSize)
	c.HistoryBudget = cmp.Or(c.HistoryBudget, DefaultHistoryBudget)
	if c.Temperature == 0 && c.Samples > 1 {
		c.Temperature = DefaultVoteTemperature
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
