package task

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// RewardVerifier is the reward rule of a task with a RewardFile (Harbor's):
// the number its verifier writes there, 0 when the grading kit saw the
// outcomes of a pytest it ran forged.
const RewardVerifier = "verifier"

// GradeVerifier grades a task whose verifier writes the reward to
// t.RewardFile (a Harbor task), in sb, a fresh sandbox from the submitted
// state: it copies the hidden tests to t.HiddenTestsDest, root-owned,
// makes the reward file's directory afresh with empty reward files (so a
// reward the solution left there is not read), runs t.TestCommand as the
// sandbox user with the limit of the task's verifier timeout (else
// w.Timeout, else GradeTimeout), and reads the reward file, or reward.json
// beside it (ParseReward). Where w.Surface names an interpreter, the
// grading kit is installed first and watches any pytest the verifier
// runs: its statuses are kept, and forged records, a changed runner or a
// session cut short that the verifier still rewarded make the reward 0
// (Tampered). The verifier's own tools and interpreter
// are the submitted filesystem's, which the solution could have replaced.
//
// A verifier that wrote no reward, or one that is not a number in [0,
// 1], is reward 0 with no error: it ran inside the solution's files. A
// verifier cut by its limit returns an error wrapping ErrRunCut.
func GradeVerifier(ctx context.Context, sb sandbox.Sandbox, t Task, hidden fs.FS, w Watch) (Result, error) {
	t = t.withDefaults()
	start := time.Now()
	res := Result{Rule: RewardVerifier, Integrity: IntegrityUnavailable}
	fail := func(err error) (Result, error) {
		res.Duration, res.Reward = time.Since(start), 0
		if ctx.Err() == nil && !errors.Is(err, ErrRunCut) && !errors.Is(err, ErrGrading) {
			err = fmt.Errorf("%w: %w", ErrGrading, err)
		}
		err = fmt.Errorf("grade %s: %w", t.ID, err)
		res.Err = err.Error()
		return res, err
	}
	if t.RewardFile == "" {
		return fail(errors.New("the task has no reward file; its verifier has nowhere to write the reward"))
	}
	watched := w.Surface.Stdlib != ""
	if watched {
		if err := installKit(ctx, sb, w.Surface); err != nil {
			return fail(err)
		}
	}
	files, err := hiddenFiles(hidden, t.HiddenTests)
	if err != nil {
		return fail(err)
	}
	if err := copyTests(ctx, sb, t, files); err != nil {
		return fail(err)
	}
	if err := sb.CopyIn(ctx, "/", bytes.NewReader(tarFiles(rewardDir(t.RewardFile)))); err != nil {
		return fail(fmt.Errorf("make the verifier's reward directory %s: %w", path.Dir(t.RewardFile), err))
	}

	limit := w.Timeout
	if t.Limits != nil && t.Limits.VerifierTimeoutSec > 0 {
		limit = time.Duration(t.Limits.VerifierTimeoutSec * float64(time.Second))
	}
	if limit == 0 {
		limit = GradeTimeout
	}
	var ex sandbox.ExecResult
	var wr run
	if watched {
		if wr, err = watchedRun(ctx, sb, t, testPaths(t, files), limit, w.Home); err != nil {
			return fail(err)
		}
		ex = wr.Exec
	} else {
		home := w.Home
		if home == "" {
			home = "/nonexistent"
		}
		ex, err = sb.Exec(ctx, sandbox.ExecRequest{Session: gradeSession, Command: cleanEnv(home) + " " + shellQuote("cd "+shellQuote(t.Workdir)+" && "+t.TestCommand),
			Timeout: limit, MaxOutput: gradeMaxOutput})
		if err != nil {
			return fail(fmt.Errorf("run the verifier: %w", err))
		}
	}
	res.ExitCode = ex.ExitCode
	res.Output = solutionWritten(ex.Output)
	if ex.Stopped != "" {
		return fail(fmt.Errorf("%w: the verifier was stopped (%s) after %s", ErrRunCut, ex.Stopped, ex.Duration.Round(time.Millisecond)))
	}
	var note string
	res.Reward, note = readReward(ctx, sb, t.RewardFile)
	if note != "" {
		res.Output = "[rollcage: " + note + "]\n" + res.Output
	}
	if wr.Hello {
		// A pytest session cut short is a forgery only when the reward
		// says the run succeeded; else it crashed, which earns nothing.
		res.Integrity = IntegrityWatched
		res.Statuses = readWatched(t, wr, &res, res.Reward > 0, nil)
	}
	res.count()
	for _, f := range res.Findings {
		if f.Severity == severityCertain {
			res.Tampered = true
		}
	}
	if res.Tampered {
		res.Reward = 0
	}
	res.Completed = true
	res.Duration = time.Since(start)
	return res, nil
}

// rewardDir are the tar entries (relative to /) of the reward file's
// directory, root-owned and writable by all, with an empty reward.txt and
// reward.json in it, replacing whatever the submitted state had there.
func rewardDir(file string) []tarFile {
	dir := strings.TrimPrefix(path.Dir(file), "/")
	var out []tarFile
	parts := strings.Split(dir, "/")
	for i := range parts {
		mode := int64(0o755)
		if i == len(parts)-1 {
			mode = 0o777
		}
		out = append(out, tarFile{strings.Join(parts[:i+1], "/") + "/", nil, mode, 0})
	}
	names := []string{path.Base(file)}
	for _, n := range []string{"reward.txt", "reward.json"} {
		if n != names[0] {
			names = append(names, n)
		}
	}
	for _, n := range names {
		out = append(out, tarFile{dir + "/" + n, nil, 0o666, 0})
	}
	return out
}

// readReward reads the reward the verifier wrote to file, else to
// reward.json beside it. A reward missing or unreadable is 0, with why.
func readReward(ctx context.Context, sb sandbox.Sandbox, file string) (float64, string) {
	for _, name := range []string{file, path.Join(path.Dir(file), "reward.json")} {
		b, cut, err := sb.ReadFile(ctx, name, 4096)
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if cut {
			return 0, fmt.Sprintf("the verifier's reward %s is over 4096 bytes; reward 0", name)
		}
		r, err := ParseReward(name, b)
		if err != nil {
			return 0, err.Error() + "; reward 0"
		}
		return r, ""
	}
	return 0, fmt.Sprintf("the verifier wrote no reward to %s; reward 0", file)
}
