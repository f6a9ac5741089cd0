package task

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// LoadError is a problem with one line of a task or script file. Its
// message is one line: "tasks.jsonl:3: field \"image\" is required".
type LoadError struct {
	File string
	Line int // 0: the file as a whole
	Err  error
}

func (e *LoadError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// FieldError says what is wrong with one field of a Task or Script.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %q %s", e.Field, e.Msg) }

var (
	idRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	hexRE = regexp.MustCompile(`^[0-9a-f]{7,64}$`)
)

// withDefaults fills the optional fields that have a default.
func (t Task) withDefaults() Task {
	if t.Workdir == "" {
		t.Workdir = DefaultWorkdir
	}
	if t.HiddenTestsDest == "" {
		t.HiddenTestsDest = DefaultHiddenTestsDest
	}
	return t
}

// Validate reports the first problem of t as a *FieldError. Defaults are
// taken into account, so a Task with empty Workdir is valid.
func (t Task) Validate() error {
	t = t.withDefaults()
	required := []struct{ name, val string }{
		{"id", t.ID},
		{"image", t.Image},
		{"instruction", t.Instruction},
		{"hidden_tests", t.HiddenTests},
		{"test_command", t.TestCommand},
	}
	if t.HiddenTests == "" && (t.TestPatch != "" || t.Benchmark == BenchmarkSWESmith || len(t.ImageHidden) > 0) {
		// The hidden tests come as a patch, are the repository's own, or
		// are in the image.
		required = slices.Delete(required, 3, 4)
	}
	for _, f := range required {
		if strings.TrimSpace(f.val) == "" {
			return &FieldError{f.name, "is required"}
		}
	}
	if c := t.DifferentialCertainAt; c < 0 || c > 1 || c != c {
		return &FieldError{"differential_certain_at", fmt.Sprintf("is %v; give a share from 0 (never certain) to 1 (certain when every case differs)", c)}
	}
	switch t.Reward {
	case "", RewardTests, RewardSummary:
	default:
		return &FieldError{"reward", fmt.Sprintf("is %q; use %q (the default) or %q", t.Reward, RewardTests, RewardSummary)}
	}
	if !idRE.MatchString(t.ID) {
		return &FieldError{"id", fmt.Sprintf("is %q; use letters, digits, '.', '_' and '-'", t.ID)}
	}
	for _, f := range []struct{ name, val string }{{"workdir", t.Workdir}, {"hidden_tests_dest", t.HiddenTestsDest}} {
		if !path.IsAbs(f.val) {
			return &FieldError{f.name, fmt.Sprintf("is %q; give an absolute path inside the sandbox", f.val)}
		}
	}
	if err := t.validateByID(); err != nil {
		return err
	}
	if err := t.validateImageHidden(); err != nil {
		return err
	}
	if t.HiddenTests != "" && (!fs.ValidPath(t.HiddenTests) || t.HiddenTests == ".") {
		return &FieldError{"hidden_tests", fmt.Sprintf("is %q; give a directory relative to the task file, without ..", t.HiddenTests)}
	}
	for _, f := range []struct{ name, val string }{{"build_context", t.BuildContext}, {"solution_dir", t.SolutionDir}} {
		if f.val != "" && (!fs.ValidPath(f.val) || f.val == ".") {
			return &FieldError{f.name, fmt.Sprintf("is %q; give a directory relative to the task file, without ..", f.val)}
		}
	}
	if t.RewardFile != "" && !path.IsAbs(t.RewardFile) {
		return &FieldError{"reward_file", fmt.Sprintf("is %q; give an absolute path inside the sandbox", t.RewardFile)}
	}
	if d := path.Clean(t.HiddenTestsDest); d == path.Clean(t.Workdir) {
		return &FieldError{"hidden_tests_dest", "must not be the workdir itself; use a directory of its own such as /opt/grader/tests"}
	}
	if t.BaseCommit != "" && !hexRE.MatchString(t.BaseCommit) {
		return &FieldError{"base_commit", fmt.Sprintf("is %q; give a full lowercase commit id", t.BaseCommit)}
	}
	for _, lists := range []struct {
		name string
		vals []string
	}{{"protected_paths", t.ProtectedPaths}, {"visible_tests", t.VisibleTests}} {
		for _, p := range lists.vals {
			if err := validPattern(p); err != nil {
				return &FieldError{lists.name, fmt.Sprintf("has bad pattern %q: %v", p, err)}
			}
		}
	}
	switch t.Grade {
	case "", GradeDiff, GradeSnapshot:
	default:
		return &FieldError{"grade", fmt.Sprintf("is %q; use %q (the default) or %q", t.Grade, GradeDiff, GradeSnapshot)}
	}
	for _, h := range t.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/: ") {
			return &FieldError{"allowed_hosts", fmt.Sprintf("has %q; give a bare host name such as pypi.org", h)}
		}
	}
	return nil
}

// LoadFile reads the task file at path. The returned FS is the file's
// directory, the root that Task.HiddenTests is relative to and that Grade
// takes.
func LoadFile(p string) ([]Task, fs.FS, error) { return LoadFileWith(p, LoadOptions{}) }

// LoadFileWith is LoadFile with options for benchmark instances.
func LoadFileWith(p string, o LoadOptions) ([]Task, fs.FS, error) {
	tasks, fsys, problems := CheckFile(p, o)
	if len(problems) > 0 {
		return nil, nil, problems[0]
	}
	return tasks, fsys, nil
}

// CheckFile is Check on the file at path p; problems name the file as p.
func CheckFile(p string, o LoadOptions) ([]Task, fs.FS, []*LoadError) {
	dir, name := filepath.Split(p)
	if dir == "" {
		dir = "."
	}
	fsys := os.DirFS(dir)
	tasks, problems := Check(fsys, name, o)
	for _, le := range problems {
		le.File = p // name the file as the user gave it
	}
	return tasks, fsys, problems
}

// Load reads the task file name from fsys: rollcage's JSONL tasks, or
// benchmark instances (see LoadWith). Blank lines and lines starting with
// # are skipped; unknown fields and duplicate ids are errors; defaults are
// applied. Hidden test directories are resolved relative to name's
// directory and must exist in fsys.
func Load(fsys fs.FS, name string) ([]Task, error) { return LoadWith(fsys, name, LoadOptions{}) }

// LoadWith is Load with options. Besides rollcage's tasks, a line may be
// a benchmark instance (an object with "instance_id" and no "id"): from
// SWE-bench, SWE-Gym or SWE-smith, as JSONL or, in a file named *.json, a
// JSON array (or one object) over many lines; FAIL_TO_PASS and
// PASS_TO_PASS may be lists or JSON strings holding lists, as in the
// Hugging Face exports. See instanceTask for how an instance becomes a
// Task. It returns the first problem Check finds.
func LoadWith(fsys fs.FS, name string, o LoadOptions) ([]Task, error) {
	tasks, problems := Check(fsys, name, o)
	if len(problems) > 0 {
		return nil, problems[0]
	}
	return tasks, nil
}

// Check reads the task file name as LoadWith does but goes on past a bad
// task, returning every problem (one line each) and the tasks that have
// none.
func Check(fsys fs.FS, name string, o LoadOptions) ([]Task, []*LoadError) {
	if err := o.Validate(); err != nil {
		return nil, []*LoadError{{File: name, Err: err}}
	}
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		// The LoadError names the file; the PathError's own "open NAME"
		// would say it again (relative to the directory, at that).
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, []*LoadError{{File: name, Err: fmt.Errorf("cannot open the task file: %w", err)}}
	}
	base := path.Dir(name)
	var tasks []Task
	var problems []*LoadError
	seen := map[string]int{}
	each := eachLine
	if strings.HasSuffix(name, ".json") {
		each = eachJSONValue
	}
	err = each(bytes.NewReader(data), func(line int, data []byte) error {
		problem := func(err error) error {
			problems = append(problems, &LoadError{File: name, Line: line, Err: err})
			return nil
		}
		t, err := decodeTask(data, o)
		if err != nil {
			return problem(err)
		}
		if err := t.Validate(); err != nil {
			return problem(err)
		}
		if first, ok := seen[t.ID]; ok {
			return problem(fmt.Errorf("duplicate id %q (first on line %d)", t.ID, first))
		}
		seen[t.ID] = line
		if t.HiddenTests != "" {
			if st, err := fs.Stat(fsys, path.Join(base, t.HiddenTests)); err != nil || !st.IsDir() {
				return problem(&FieldError{"hidden_tests", fmt.Sprintf("names %q, which is not a directory next to the task file", t.HiddenTests)})
			}
		}
		tasks = append(tasks, t.withDefaults())
		return nil
	})
	if err != nil {
		var le *LoadError
		if !errors.As(err, &le) {
			le = &LoadError{Err: err}
		}
		if le.File == "" {
			le.File = name
		}
		problems = append(problems, le)
	}
	if len(tasks) == 0 && len(problems) == 0 {
		problems = append(problems, &LoadError{File: name, Err: errors.New("no tasks; write one JSON object per line")})
	}
	return tasks, problems
}

// decodeTask decodes one task: rollcage's own (strictly), or a benchmark
// instance.
func decodeTask(data []byte, o LoadOptions) (Task, error) {
	var keys map[string]json.RawMessage
	if json.Unmarshal(data, &keys) == nil && keys["id"] == nil {
		if isMultiSWE(keys) {
			return multiSWETask(data, o)
		}
		if isR2EGym(keys) {
			return r2eGymTask(data, o)
		}
		if keys["instance_id"] != nil {
			return instanceTask(data, o)
		}
	}
	var t Task
	err := decodeStrict(data, &t)
	return t, err
}

// eachLine calls fn with every line that is neither blank nor a # comment.
func eachLine(r io.Reader, fn func(line int, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		data := bytes.TrimSpace(sc.Bytes())
		if len(data) == 0 || data[0] == '#' {
			continue
		}
		if err := fn(n, data); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read after line %d: %w", n, err)
	}
	return nil
}

// decodeStrict decodes one JSON value into v, rejecting unknown fields and
// trailing data, with messages that name the field.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errors.New("invalid JSON: more than one value on the line; put one object per line")
	}
	return nil
}

func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("invalid JSON near byte %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		return &FieldError{typ.Field, fmt.Sprintf("must be %s, not %s", typ.Type, typ.Value)}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("invalid JSON: unexpected end of line; each object must be on one line")
	}
	if s, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s; see the task file format in the README", s)
	}
	return fmt.Errorf("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// eachJSONValue calls fn with each element of a JSON array, or with the
// one object the input holds, and the line each starts on.
func eachJSONValue(r io.Reader, fn func(line int, data []byte) error) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	lineAt := func(off int64) int {
		for off < int64(len(data)) && strings.ContainsRune(" \t\r\n,", rune(data[off])) {
			off++
		}
		return 1 + bytes.Count(data[:off], []byte("\n"))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("invalid JSON: %w; give a JSON array of instances, or one object", jsonError(err))
	}
	if tok == json.Delim('{') {
		return fn(lineAt(0), bytes.TrimSpace(data))
	}
	if tok != json.Delim('[') {
		return errors.New("a .json task file must hold a JSON array of tasks or instances, or one object")
	}
	for dec.More() {
		line := lineAt(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return &LoadError{Line: line, Err: jsonError(err)}
		}
		if err := fn(line, raw); err != nil {
			return err
		}
	}
	return nil
}
