package task

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// ErrGrading marks a grading that could not run: the hidden tests could
// not be copied in, the test command was not found or timed out, or its
// output held no test summary. Trainers class such episodes as grader
// failures, not as the policy's.
var ErrGrading = errors.New("grading failed")

// Grading limits. The test command's whole output is captured up to
// gradeMaxOutput; Result.Output keeps its last resultOutputTail bytes.
const (
	GradeTimeout     = 10 * time.Minute
	gradeMaxOutput   = 4 << 20
	resultOutputTail = 8 << 10
	// gradeSession is a shell of its own, so what the policy exported or
	// aliased in its sessions does not reach the test run.
	gradeSession = "rollcage-grade"
)

// Result is the outcome of grading one episode.
type Result struct {
	// Reward is 1 iff the test command exited 0 with no failures or errors
	// and at least one test passed; else 0.
	Reward   float64       `json:"reward"`
	Passed   int           `json:"passed"`
	Failed   int           `json:"failed"`
	Errors   int           `json:"errors"`
	Skipped  int           `json:"skipped"`
	ExitCode int           `json:"exit_code"`
	Output   string        `json:"output,omitempty"` // the tail of the test output
	Duration time.Duration `json:"duration_ns"`
	// Err is set when grading could not run (the error wraps ErrGrading).
	Err string `json:"error,omitempty"`

	// Rule is the reward rule that decided (RewardTests or
	// RewardSummary). The rest is set by a watched grading only.
	Rule string `json:"rule,omitempty"`
	// Statuses is every expected id's status; Probes the known-answer
	// probes'; Integrity whether the framework was watched from inside.
	Statuses  map[string]Status `json:"statuses,omitempty"`
	Probes    []ProbeResult     `json:"probes,omitempty"`
	Integrity string            `json:"integrity,omitempty"`
	// Findings are what the run showed of tampering; Tampered: a certain
	// one (reward 0). Completed: the run finished on its own.
	Findings  []Finding `json:"findings,omitempty"`
	Tampered  bool      `json:"tampered,omitempty"`
	Completed bool      `json:"completed,omitempty"`
	// Cases is how many differential cases ran, CasesFailed how many
	// differed from the reference fix.
	Cases       int `json:"cases,omitempty"`
	CasesFailed int `json:"cases_failed,omitempty"`
	// Matched is how many expected tests had their expected status
	// (RewardStatuses).
	Matched int `json:"matched,omitempty"`
}

// Grade copies t's hidden tests from hidden (the task file's directory)
// into the sandbox at t.HiddenTestsDest, root-owned and read-only for the
// sandbox user, runs t.TestCommand in t.Workdir and scores pytest's
// summary. Call it only after the policy has stopped. A test failure is a
// Result with Reward 0; an error (wrapping ErrGrading, or ctx's) means
// there is no verdict, and the Result still carries what is known.
func Grade(ctx context.Context, sb sandbox.Sandbox, t Task, hidden fs.FS) (Result, error) {
	t = t.withDefaults()
	start := time.Now()
	var res Result
	fail := func(err error) (Result, error) {
		res.Duration = time.Since(start)
		res.Reward = 0
		if ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", ErrGrading, err)
		}
		err = fmt.Errorf("grade %s: %w", t.ID, err)
		res.Err = err.Error()
		return res, err
	}

	archive, err := tarDir(hidden, t.HiddenTests)
	if err != nil {
		return fail(err)
	}
	if err := sb.CopyIn(ctx, t.HiddenTestsDest, bytes.NewReader(archive)); err != nil {
		return fail(fmt.Errorf("copy hidden tests to %s: %w", t.HiddenTestsDest, err))
	}
	ex, err := sb.Exec(ctx, sandbox.ExecRequest{
		Session:   gradeSession,
		Command:   gradeCommand(t),
		Timeout:   GradeTimeout,
		MaxOutput: gradeMaxOutput,
	})
	if err != nil {
		return fail(fmt.Errorf("run test command: %w", err))
	}
	res.ExitCode = ex.ExitCode
	res.Output = tail(ex.Output, resultOutputTail)
	if ex.Stopped != "" {
		return fail(fmt.Errorf("test command stopped (%s) after %s", ex.Stopped, ex.Duration.Round(time.Millisecond)))
	}
	if ex.ExitCode == 126 || ex.ExitCode == 127 {
		return fail(fmt.Errorf("test command could not run (exit %d): %s", ex.ExitCode, lastLine(ex.Output)))
	}
	sum, ok := ParseSummary(ex.Output)
	switch {
	case !ok:
		return fail(fmt.Errorf("no pytest summary line in the test output (exit %d); the test command must run pytest", ex.ExitCode))
	case sum.NoTests:
		return fail(fmt.Errorf("no tests ran (exit %d); check hidden_tests and test_command", ex.ExitCode))
	}
	res.Passed, res.Failed, res.Errors, res.Skipped = sum.Passed, sum.Failed, sum.Errors, sum.Skipped
	if ex.ExitCode == 0 && sum.Failed+sum.Errors == 0 && sum.Passed > 0 {
		res.Reward = 1
	}
	res.Duration = time.Since(start)
	return res, nil
}

// tarDir archives the files under dir of fsys with names relative to dir,
// owned by root, directories 0755 and files 0644: the sandbox user can
// read the tests but not change them.
func tarDir(fsys fs.FS, dir string) ([]byte, error) {
	if fsys == nil {
		return nil, errors.New("hidden tests: no file system given")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	n := 0
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if rel == "" {
			return nil
		}
		h := &tar.Header{Name: rel, Uid: 0, Gid: 0, Uname: "root", Gname: "root", ModTime: time.Unix(0, 0)}
		switch {
		case d.IsDir():
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, 0o755, rel+"/"
			return tw.WriteHeader(h)
		case d.Type().IsRegular():
			data, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(data))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			n++
			_, err = tw.Write(data)
			return err
		}
		return nil // symlinks and the like are not test sources
	})
	if err != nil {
		return nil, fmt.Errorf("hidden tests %s: %w", dir, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("hidden tests %s: no files", dir)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("hidden tests %s: %w", dir, err)
	}
	return buf.Bytes(), nil
}

// Summary is what pytest's final line says.
type Summary struct {
	Passed, Failed, Errors, Skipped int
	XFailed, XPassed, Deselected    int
	// NoTests: pytest said "no tests ran".
	NoTests bool
}

var (
	ansiRE    = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	summaryRE = regexp.MustCompile(`^=*\s*(.*?)\s+in\s+[0-9.]+s(?:\s+\([0-9:.]+\))?\s*=*$`)
	countRE   = regexp.MustCompile(`^(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun|reruns)$`)
)

// ParseSummary finds pytest's summary line ("3 passed, 1 failed in 0.12s",
// with or without the ==== frame of full output, colours stripped) and
// returns its counts; ok is false when there is none.
func ParseSummary(out string) (sum Summary, ok bool) {
	if strings.IndexByte(out, 0x1b) >= 0 {
		out = ansiRE.ReplaceAllString(out, "")
	}
	// The summary is near the end: walk lines backwards, and only lines
	// that can be one reach the regexp.
	for len(out) > 0 {
		line := out
		if i := strings.LastIndexByte(out, '\n'); i >= 0 {
			line, out = out[i+1:], out[:i]
		} else {
			out = ""
		}
		line = strings.TrimSpace(line)
		if !strings.Contains(line, " in ") {
			continue
		}
		if s, ok := parseSummaryLine(line); ok {
			return s, true
		}
	}
	return Summary{}, false
}

func parseSummaryLine(line string) (Summary, bool) {
	m := summaryRE.FindStringSubmatch(line)
	if m == nil {
		return Summary{}, false
	}
	var s Summary
	if m[1] == "no tests ran" {
		s.NoTests = true
		return s, true
	}
	for _, part := range strings.Split(m[1], ", ") {
		c := countRE.FindStringSubmatch(part)
		if c == nil {
			return Summary{}, false
		}
		n, _ := strconv.Atoi(c[1])
		switch c[2] {
		case "passed":
			s.Passed = n
		case "failed":
			s.Failed = n
		case "error", "errors":
			s.Errors = n
		case "skipped":
			s.Skipped = n
		case "xfailed":
			s.XFailed = n
		case "xpassed":
			s.XPassed = n
		case "deselected":
			s.Deselected = n
		}
	}
	if s.Passed+s.Failed+s.Errors+s.Skipped+s.XFailed+s.XPassed == 0 {
		// Only warnings or deselections: nothing ran.
		s.NoTests = true
	}
	return s, true
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return tail(s, 200)
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// gradeCommand runs the test command in a clean environment: nothing the
// agent exported, no startup files, a HOME it could not have planted a
// usercustomize.py or a fake tool in.
func gradeCommand(t Task) string {
	return "cd " + shellQuote(t.Workdir) + " && exec /usr/bin/env -i" +
		" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent LANG=C.UTF-8" +
		" /bin/bash --noprofile --norc -c " + shellQuote(t.TestCommand)
}
