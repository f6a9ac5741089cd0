package task

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// BenchmarkHarbor marks a task loaded from a Harbor task directory.
const BenchmarkHarbor = "harbor"

// Where a Harbor verifier finds its tests and writes its reward.
const (
	HarborTestsDir   = "/tests"
	HarborRewardFile = "/logs/verifier/reward.txt"
)

// harborConfig is the part of Harbor's task.toml rollcage reads; other
// keys (metadata, authors, ...) are ignored.
type harborConfig struct {
	Task struct {
		Name string `toml:"name"`
	} `toml:"task"`
	Verifier struct {
		TimeoutSec float64 `toml:"timeout_sec"`
	} `toml:"verifier"`
	Agent struct {
		TimeoutSec float64 `toml:"timeout_sec"`
	} `toml:"agent"`
	Environment struct {
		DockerImage     string  `toml:"docker_image"`
		BuildTimeoutSec float64 `toml:"build_timeout_sec"`
		CPUs            float64 `toml:"cpus"`
		MemoryMB        int     `toml:"memory_mb"`
		StorageMB       int     `toml:"storage_mb"`
	} `toml:"environment"`
}

// IsHarborDir reports whether dir of fsys is a Harbor task directory
// (it holds task.toml) or a dataset of them (a subdirectory does).
func IsHarborDir(fsys fs.FS, dir string) bool {
	if _, err := fs.Stat(fsys, path.Join(dir, "task.toml")); err == nil {
		return true
	}
	return len(harborTaskDirs(fsys, dir)) > 0
}

func harborTaskDirs(fsys fs.FS, dir string) []string {
	entries, _ := fs.ReadDir(fsys, dir)
	var out []string
	for _, e := range entries {
		if _, err := fs.Stat(fsys, path.Join(dir, e.Name(), "task.toml")); e.IsDir() && err == nil {
			out = append(out, path.Join(dir, e.Name()))
		}
	}
	return out
}

// CheckHarborDir loads the Harbor task directory p, or every task
// directory in the dataset directory p, returning the tasks without
// problems, the file system their paths are relative to (p itself) and
// every problem, one line each.
func CheckHarborDir(p string) ([]Task, fs.FS, []*LoadError) {
	fsys := os.DirFS(p)
	dirs := []string{"."}
	if _, err := fs.Stat(fsys, "task.toml"); err != nil {
		dirs = harborTaskDirs(fsys, ".")
		if len(dirs) == 0 {
			return nil, nil, []*LoadError{{File: p, Err: errors.New("neither a Harbor task directory (task.toml) nor a dataset of them")}}
		}
	}
	var tasks []Task
	var problems []*LoadError
	for _, d := range dirs {
		t, errs := harborTask(fsys, d)
		for _, le := range errs {
			le.File = path.Join(p, le.File)
		}
		if len(errs) > 0 {
			problems = append(problems, errs...)
			continue
		}
		tasks = append(tasks, t)
	}
	return tasks, fsys, problems
}

// LoadHarbor is CheckHarborDir returning its first problem as the error.
func LoadHarbor(p string) ([]Task, fs.FS, error) {
	tasks, fsys, problems := CheckHarborDir(p)
	if len(problems) > 0 {
		return nil, nil, problems[0]
	}
	return tasks, fsys, nil
}

// harborTask turns the Harbor task directory dir into a Task: the
// instruction is instruction.md; the image is [environment].docker_image
// or built from environment/Dockerfile (BuildContext), tagged with the
// hash of environment/, and the workdir its last WORKDIR; the hidden tests
// are tests/, copied to /tests only in the grading sandbox, which starts
// from a snapshot of the episode's files (Harbor's separate verifier);
// the test command is bash /tests/test.sh and the reward what it writes
// to /logs/verifier/reward.txt (or reward.json); solution/ is the
// reference solution. Each problem names the file it is in.
func harborTask(fsys fs.FS, dir string) (Task, []*LoadError) {
	var problems []*LoadError
	bad := func(file string, line int, format string, args ...any) {
		problems = append(problems, &LoadError{File: path.Join(dir, file), Line: line, Err: fmt.Errorf(format, args...)})
	}
	id := path.Base(dir)
	if dir == "." {
		id = ""
	}
	var cfg harborConfig
	data, err := fs.ReadFile(fsys, path.Join(dir, "task.toml"))
	if err == nil {
		_, err = toml.Decode(string(data), &cfg)
		var perr toml.ParseError
		if errors.As(err, &perr) {
			bad("task.toml", perr.Position.Line, "invalid TOML: %s", perr.Message)
		} else if err != nil {
			bad("task.toml", 0, "%v", err)
		}
	} else {
		bad("task.toml", 0, "cannot read: %v", err)
	}
	if id == "" || !idRE.MatchString(id) {
		// A task directory opened as the root is named by [task].name.
		id = strings.NewReplacer("/", "__", "@", "_").Replace(cfg.Task.Name)
	}
	if !idRE.MatchString(id) {
		bad("task.toml", 0, "no usable task id: name the directory with letters, digits, '.', '_' and '-', or set [task] name")
	}
	instruction, err := fs.ReadFile(fsys, path.Join(dir, "instruction.md"))
	if err != nil || len(bytes.TrimSpace(instruction)) == 0 {
		bad("instruction.md", 0, "missing or empty: it is what the agent is asked to do")
	}
	for _, f := range []string{"environment/docker-compose.yaml", "environment/docker-compose.yml", "steps"} {
		if _, err := fs.Stat(fsys, path.Join(dir, f)); err == nil {
			bad(f, 0, "multi-container and multi-step Harbor tasks are not supported; give one environment/Dockerfile and one tests/test.sh")
		}
	}
	t := Task{
		ID:              id,
		InstanceID:      cfg.Task.Name,
		Benchmark:       BenchmarkHarbor,
		Instruction:     string(instruction),
		HiddenTests:     path.Join(dir, "tests"),
		HiddenTestsDest: HarborTestsDir,
		TestCommand:     "bash " + HarborTestsDir + "/test.sh",
		RewardFile:      HarborRewardFile,
		Grade:           GradeSnapshot,
		Workdir:         "/",
		Seal:            new(bool), // not a repository: nothing to seal
	}
	if l := (Limits{cfg.Agent.TimeoutSec, cfg.Verifier.TimeoutSec, cfg.Environment.BuildTimeoutSec, cfg.Environment.CPUs, cfg.Environment.MemoryMB, cfg.Environment.StorageMB}); l != (Limits{}) {
		t.Limits = &l
	}
	if _, err := fs.Stat(fsys, path.Join(dir, "solution")); err == nil {
		t.SolutionDir = path.Join(dir, "solution")
	}
	dockerfile, derr := fs.ReadFile(fsys, path.Join(dir, "environment", "Dockerfile"))
	switch {
	case cfg.Environment.DockerImage != "":
		t.Image = cfg.Environment.DockerImage
	case derr != nil:
		bad("environment/Dockerfile", 0, "missing, and task.toml gives no [environment] docker_image: nothing to run the agent in")
	default:
		sum, err := hashTree(fsys, path.Join(dir, "environment"))
		if err != nil {
			bad("environment", 0, "%v", err)
		}
		t.BuildContext = path.Join(dir, "environment")
		t.Image = "rollcage-harbor/" + strings.ToLower(id) + ":" + sum[:12]
	}
	if wd := lastWorkdir(dockerfile); wd != "" {
		t.Workdir = wd
	}
	script, err := fs.ReadFile(fsys, path.Join(dir, "tests", "test.sh"))
	if err != nil {
		bad("tests/test.sh", 0, "missing: it is the verifier, writing the reward to %s", HarborRewardFile)
	} else {
		for _, n := range networkInstalls(script) {
			bad("tests/test.sh", n.line, "installs tools over the network (%s), which the verifier has not: install them in environment/Dockerfile and drop the line", n.what)
		}
	}
	if len(problems) == 0 {
		if err := t.Validate(); err != nil {
			bad("task.toml", 0, "%v", err)
		}
	}
	return t, problems
}

// lastWorkdir is the last absolute WORKDIR of a Dockerfile.
func lastWorkdir(dockerfile []byte) string {
	wd := ""
	sc := bufio.NewScanner(bytes.NewReader(dockerfile))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && strings.EqualFold(f[0], "WORKDIR") && path.IsAbs(f[1]) {
			wd = path.Clean(f[1])
		}
	}
	return wd
}

// networkInstallRE are commands that fetch tools from the network.
var networkInstallRE = regexp.MustCompile(`\b(apt(?:-get)?\s+(?:-\S+\s+)*(?:update|install)|apk\s+add|(?:yum|dnf)\s+install|pip3?\s+install|python3?\s+-m\s+pip\s+install|uv\s+(?:pip\s+install|add|sync|tool\s+install)|uvx|curl\b[^|#]*\|\s*(?:ba)?sh|wget|npm\s+(?:install|ci|i)|npx|go\s+install)\b`)

type installLine struct {
	line int
	what string
}

// networkInstalls are the lines of a shell script that install tools
// over the network; comments are skipped.
func networkInstalls(script []byte) []installLine {
	var out []installLine
	for i, line := range strings.Split(string(script), "\n") {
		if code, _, _ := strings.Cut(line, "#"); strings.TrimSpace(code) != "" {
			if m := networkInstallRE.FindString(code); m != "" {
				out = append(out, installLine{i + 1, strings.Join(strings.Fields(m), " ")})
			}
		}
	}
	return out
}

// hashTree is the SHA-256, in hex, of the names and contents of the files
// under dir.
func hashTree(fsys fs.FS, dir string) (string, error) {
	var names []string
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", strings.TrimPrefix(n, dir+"/"), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ParseReward reads a Harbor verifier's reward file: reward.txt holds one
// number; reward.json an object whose "reward" is the reward, or whose
// only value is. A reward outside [0, 1] is an error, as a verifier that
// writes one is broken.
func ParseReward(name string, data []byte) (float64, error) {
	var r float64
	if strings.HasSuffix(name, ".json") {
		var m map[string]float64
		if err := json.Unmarshal(data, &m); err != nil {
			return 0, fmt.Errorf("reward %s: want a JSON object of numbers: %w", name, err)
		}
		v, ok := m["reward"]
		if !ok && len(m) == 1 {
			for _, only := range m {
				v, ok = only, true
			}
		}
		if !ok {
			return 0, fmt.Errorf("reward %s: no \"reward\" among %d values", name, len(m))
		}
		r = v
	} else {
		v, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
		if err != nil {
			return 0, fmt.Errorf("reward %s: %q is not a number", name, bytes.TrimSpace(data))
		}
		r = v
	}
	if r < 0 || r > 1 {
		return 0, fmt.Errorf("reward %s: %g is outside [0, 1]", name, r)
	}
	return r, nil
}
