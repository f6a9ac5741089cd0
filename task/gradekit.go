package task

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// The grading kit: a sitecustomize that the graded pytest runs before any
// code of the repository, and the plugin it loads. See
// gradekit/sitecustomize.py for what runs inside the test process.
var (
	//go:embed gradekit/sitecustomize.py
	kitSiteCustomize []byte
	//go:embed gradekit/rollcage_grade_plugin.py
	kitPlugin []byte
	//go:embed gradekit/rollcage_grade_enc.py
	kitEnc []byte
	//go:embed gradekit/cases.py
	kitCases []byte
)

const (
	// recordsRoot holds a root-owned directory per run with the records
	// file, which the sandbox user may append to but not replace.
	recordsRoot = "/var/lib/rollcage-grade"
	// maxRecords bounds the records file; more is a flood by the code
	// under test.
	maxRecords = 16 << 20
)

// installKit puts the kit into the interpreter's standard library
// directory of a grading sandbox, root-owned, before the submission is
// applied. The image's own sitecustomize, if any, is kept beside it and
// run after the kit.
func installKit(ctx context.Context, sb sandbox.Sandbox, surf Surface) error {
	if surf.Stdlib == "" {
		return fmt.Errorf("install the grading kit: the interpreter named no standard library directory: %w", ErrGrading)
	}
	var orig []byte
	if surf.ImageSiteCustomize != "" {
		b, cut, err := sb.ReadFile(ctx, surf.ImageSiteCustomize, 1<<20)
		if err != nil || cut {
			return fmt.Errorf("install the grading kit: read the image's sitecustomize %s: %v (cut %v): %w", surf.ImageSiteCustomize, err, cut, ErrGrading)
		}
		if !bytes.Equal(b, kitSiteCustomize) {
			orig = b
		}
	}
	files := []tarFile{{"sitecustomize.py", kitSiteCustomize, 0o644, 0}, {"rollcage_grade_plugin.py", kitPlugin, 0o644, 0},
		{"rollcage_grade_enc.py", kitEnc, 0o644, 0}}
	if orig != nil {
		files = append(files, tarFile{"sitecustomize_image.py", orig, 0o644, 0})
	}
	if err := sb.CopyIn(ctx, surf.Stdlib, bytes.NewReader(tarFiles(files))); err != nil {
		return fmt.Errorf("install the grading kit in %s: %w", surf.Stdlib, err)
	}
	return nil
}

type tarFile struct {
	name string
	data []byte
	mode int64
	uid  int
}

func tarFiles(files []tarFile) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if strings.HasSuffix(f.name, "/") {
			_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: time.Unix(0, 0)})
			continue
		}
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Uid: f.uid, Gid: f.uid, ModTime: time.Unix(0, 0)})
		_, _ = tw.Write(f.data)
	}
	_ = tw.Close()
	return buf.Bytes()
}

// kitConfig is what the kit reads on fd 7 before any code of the
// repository runs.
type kitConfig struct {
	Key      string   `json:"key"`
	Workdir  string   `json:"workdir"`
	Tests    []string `json:"tests"`
	TestDirs []string `json:"test_dirs"`
	Plugin   string   `json:"plugin"`
}

// run is one watched run of a test command.
type run struct {
	Exec    sandbox.ExecResult
	Records []record
	// Cut: the records file was over maxRecords. Forged: a record whose
	// MAC or sequence did not check (the rest were dropped).
	Cut, Forged bool
	// Hello: the graded pytest started with the kit; End: it finished
	// its session (EndStatus is its exit status).
	Hello, End bool
	EndStatus  int
}

// record is one record of the kit's channel: its kind and fields.
type record struct {
	Kind   string
	Fields []string
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// watchedRun runs t.TestCommand in sb under the kit: a fresh key and
// records file, the sandbox user's own environment, the key handed over
// on fd 7 from the command's standard input.
func watchedRun(ctx context.Context, sb sandbox.Sandbox, t Task, tests []string, limit time.Duration, home string) (run, error) {
	var r run
	key := randHex(32)
	dir := recordsRoot + "/" + randHex(8)
	if err := sb.CopyIn(ctx, "/", bytes.NewReader(tarFiles([]tarFile{
		{strings.TrimPrefix(recordsRoot, "/") + "/", nil, 0o755, 0},
		{strings.TrimPrefix(dir, "/") + "/", nil, 0o755, 0},
		{strings.TrimPrefix(dir, "/") + "/r", nil, 0o666, 0},
	}))); err != nil {
		return r, fmt.Errorf("make the records file: %w", err)
	}
	if tests == nil {
		tests = []string{} // the kit iterates over it
	}
	cfg, _ := json.Marshal(kitConfig{Key: key, Workdir: t.Workdir, Tests: tests, TestDirs: []string{t.HiddenTestsDest},
		Plugin: "rollcage_grade_" + randHex(6)})
	ex, err := sb.Exec(ctx, sandbox.ExecRequest{
		Session:   gradeSession,
		Command:   watchedCommand(t, dir+"/r", home),
		Stdin:     string(cfg) + "\n",
		Timeout:   limit,
		MaxOutput: gradeMaxOutput,
	})
	if err != nil {
		return r, fmt.Errorf("run test command: %w", err)
	}
	r.Exec = ex
	b, cut, err := sb.ReadFile(ctx, dir+"/r", maxRecords)
	if err != nil {
		if errors.Is(err, sandbox.ErrClosed) || errors.Is(err, sandbox.ErrAgent) || errors.Is(err, sandbox.ErrUnavailable) {
			return r, fmt.Errorf("read the test records: %w", err)
		}
		// The file is root's, in root's directory: only the code under
		// test can have made it unreadable.
		r.Forged = true
		return r, nil
	}
	r.Cut = cut
	r.Records, r.Forged = verifyRecords(b, key)
	for _, rec := range r.Records {
		switch rec.Kind {
		case "hello":
			r.Hello = true
		case "end":
			r.End = true
			if len(rec.Fields) > 0 {
				r.EndStatus, _ = strconv.Atoi(rec.Fields[0])
			}
		}
	}
	return r, nil
}

// watchedCommand is the script of a watched run: the key from standard
// input onto fd 7 (the kit reads and closes it), the records file on fd
// 8, then the test command as the sandbox user's own shell would run it.
func watchedCommand(t Task, records, home string) string {
	if home == "" {
		home = `"$HOME"`
	} else {
		home = shellQuote(home)
	}
	return `IFS= read -r K || exit 96
exec 7<<<"$K" 8>>` + shellQuote(records) + ` 0</dev/null
unset K
cd ` + shellQuote(t.Workdir) + ` && exec /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin` +
		` HOME=` + home + ` USER="$USER" LANG=C.UTF-8 TERM=dumb PAGER=cat GIT_PAGER=cat` +
		` /bin/bash --noprofile --norc -c ` + shellQuote(t.TestCommand)
}

// verifyRecords checks the chain of records in b with key: each line is
// "seq mac payload", mac = HMAC-SHA256(key, prev mac, seq, payload). It
// returns the records up to the first that does not check, and whether
// there was one.
func verifyRecords(b []byte, key string) (recs []record, forged bool) {
	k, _ := hex.DecodeString(key)
	var prev []byte
	seq := 0
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		f := bytes.SplitN(line, []byte{' '}, 3)
		if len(f) != 3 {
			return recs, true
		}
		n, err := strconv.Atoi(string(f[0]))
		if err != nil || n != seq+1 {
			return recs, true
		}
		m := hmac.New(sha256.New, k)
		m.Write(prev)
		m.Write([]byte{'\n'})
		m.Write(f[0])
		m.Write([]byte{'\n'})
		m.Write(f[2])
		sum := m.Sum(nil)
		got, err := hex.DecodeString(string(f[1]))
		if err != nil || !hmac.Equal(got, sum) {
			return recs, true
		}
		prev, seq = sum, n
		var fields []string
		for _, h := range strings.Fields(string(f[2])) {
			h, ok := strings.CutPrefix(h, "x")
			v, err := hex.DecodeString(h)
			if !ok || err != nil {
				return recs, true
			}
			fields = append(fields, string(v))
		}
		if len(fields) == 0 {
			return recs, true
		}
		recs = append(recs, record{Kind: fields[0], Fields: fields[1:]})
	}
	return recs, false
}

// statuses folds a run's per-phase reports into a status per node id. A
// phase reported twice with different outcomes is a conflict: something
// besides pytest reported it.
func statuses(recs []record) (st map[string]Status, conflicts []string) {
	type phases struct{ setup, call, teardown, xfail string }
	byID := map[string]*phases{}
	var order []string
	for _, r := range recs {
		switch r.Kind {
		case "rep":
			if len(r.Fields) < 4 {
				continue
			}
			id, when, outcome, xfail := r.Fields[0], r.Fields[1], r.Fields[2], r.Fields[3]
			p := byID[id]
			if p == nil {
				p = &phases{}
				byID[id] = p
				order = append(order, id)
			}
			slot := map[string]*string{"setup": &p.setup, "call": &p.call, "teardown": &p.teardown}[when]
			if slot == nil {
				continue
			}
			if *slot != "" && *slot != outcome {
				conflicts = append(conflicts, id+" "+when+": "+*slot+" then "+outcome)
			}
			if *slot == "" || outcome != "passed" {
				*slot = outcome
			}
			if xfail != "" {
				p.xfail = xfail
			}
		case "col":
			if len(r.Fields) >= 1 {
				id := r.Fields[0]
				if _, ok := byID[id]; !ok {
					byID[id] = &phases{setup: "failed"}
					order = append(order, id)
				}
			}
		}
	}
	st = make(map[string]Status, len(byID))
	for _, id := range order {
		p := byID[id]
		var s Status
		switch {
		case p.setup == "failed":
			s = StatusError
		case p.setup == "skipped" || p.call == "skipped":
			s = StatusSkipped
			if p.xfail != "" {
				s = StatusXFailed
			}
		case p.call == "failed":
			s = StatusFailed
		case p.call == "passed" && p.xfail != "":
			s = StatusXPassed
		case p.call == "passed" && p.teardown == "failed":
			s = StatusError
		case p.call == "passed" && p.setup == "passed" && p.teardown == "passed":
			s = StatusPassed
		default:
			s = StatusMissing // a phase never reported: the run was cut
		}
		st[id] = s
	}
	return st, conflicts
}

// runStart is sb's clock before a test run, for startupWrites: a status
// change time, which no user can set back, compares against it.
func runStart(ctx context.Context, sb sandbox.Sandbox) (string, error) {
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Session: submitSession, Command: "date +@%s.%N", Timeout: time.Minute})
	ts := strings.TrimSpace(res.Output)
	if err == nil && (res.ExitCode != 0 || !strings.HasPrefix(ts, "@")) {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, lastLine(res.Output))
	}
	if err != nil {
		return "", fmt.Errorf("read the clock before the test run: %w", err)
	}
	return ts, nil
}

// startupWrites lists the files outside workdir written in sb since
// start that a later interpreter runs at start or on import: a .pth or a
// site or user customize module anywhere, source or native modules in
// an interpreter's directories (bytecode caches aside). It compares
// status change times, which a file's owner cannot set back as it can
// the modification time.
func startupWrites(ctx context.Context, sb sandbox.Sandbox, workdir, start string) ([]string, error) {
	script := "find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path " + shellQuote(path.Clean(workdir)) + " \\) -prune -o" +
		" -newerct " + shellQuote(start) + " -type f \\( -name '*.pth' -o -name sitecustomize.py -o -name usercustomize.py" +
		" -o \\( \\( -path '*/python*' -o -path '*-packages/*' \\) \\( -name '*.py' -o -name '*.so' \\) ! -path '*/__pycache__/*' \\) \\) -print 2>/dev/null | head -n 50; true"
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Session: submitSession, Command: script, Timeout: time.Minute, MaxOutput: 64 << 10})
	if err != nil {
		return nil, fmt.Errorf("list what the test run left on the import path: %w", err)
	}
	var out []string
	for _, l := range strings.Split(res.Output, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "/") {
			out = append(out, l)
		}
	}
	return out, nil
}

// callCounts counts the tests whose call phase the records report passed
// and failed (an expected failure aside), as pytest's summary line counts
// them.
func callCounts(recs []record) (passed, failed int) {
	call := map[string]string{}
	for _, r := range recs {
		if r.Kind == "rep" && len(r.Fields) >= 4 && r.Fields[1] == "call" && r.Fields[3] == "" {
			if o, ok := call[r.Fields[0]]; !ok || o == "passed" {
				call[r.Fields[0]] = r.Fields[2] // a failure reported once stays, as in statuses
			}
		}
	}
	for _, o := range call {
		switch o {
		case "passed":
			passed++
		case "failed":
			failed++
		}
	}
	return passed, failed
}

// canonicalID is a pytest node id with its file path made relative to
// the hidden tests' directory when the file is in it, else to the
// workdir, so ids read the same however pytest chose its rootdir.
func canonicalID(t Task, id string) string {
	file, rest, _ := strings.Cut(id, "::")
	dest := strings.TrimPrefix(path.Clean(t.HiddenTestsDest), "/")
	clean := path.Clean(file)
	for strings.HasPrefix(clean, "../") {
		clean = strings.TrimPrefix(clean, "../")
	}
	clean = strings.TrimPrefix(clean, "/")
	if rel, ok := strings.CutPrefix(clean, dest+"/"); ok {
		clean = rel
	} else if wd := strings.TrimPrefix(path.Clean(t.Workdir), "/"); strings.HasPrefix(clean, wd+"/") {
		clean = strings.TrimPrefix(clean, wd+"/")
	} else if !strings.HasPrefix(file, "../") && !strings.HasPrefix(file, "/") {
		clean = path.Clean(file)
	}
	if rest == "" {
		return clean
	}
	return clean + "::" + rest
}
