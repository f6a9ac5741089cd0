package harnesstest

import (
	"context"
	"fmt"
	"io/fs"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/rollcage/rollcage/sandbox"
)

// module is the prefix of rollcage's packages in a function's name.
const module = "github.com/rollcage/rollcage/"

// Entry is where a stack entered one of rollcage's packages: the
// outermost function of the package's run of frames, and the place it
// was called from (file:line of the frame outside the package).
type Entry struct {
	Pkg  string // "monitor", "sandbox/fake"
	Func string // "monitor.(*EpisodeState).Handle"
	From string // "harness/episode.go:221"; "" at the stack's root
}

func (e Entry) String() string { return e.Func + " from " + e.From }

// Stack is the part of a call stack in rollcage's packages, outermost
// first, one Entry per run of frames in one package (frames of other
// modules in between do not end a run).
type Stack []Entry

// Pkgs are the stack's packages, outermost first.
func (s Stack) Pkgs() []string {
	out := make([]string, len(s))
	for i, e := range s {
		out[i] = e.Pkg
	}
	return out
}

// Caller is the caller's stack (skip frames above it left out: 0 is the
// function calling Caller).
func Caller(skip int) Stack {
	pcs := make([]uintptr, 256)
	n := runtime.Callers(skip+2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var all []runtime.Frame
	for {
		f, more := frames.Next()
		all = append(all, f)
		if !more {
			break
		}
	}
	slices.Reverse(all) // outermost first
	var s Stack
	prev := ""
	for i, f := range all {
		pkg := ""
		if rest, ok := strings.CutPrefix(f.Function, module); ok {
			// "server.(*Server).handleCall", "sandbox/fake.(*Backend).exec"
			slash := strings.LastIndex(rest, "/")
			pkg = rest[:slash+1] + strings.SplitN(rest[slash+1:], ".", 2)[0]
		}
		if pkg == "" || pkg == prev {
			// Frames of other modules (net/http's mux, errgroup) between
			// two of one package's do not end its run.
			continue
		}
		from := ""
		if i > 0 {
			from = shortFile(all[i-1].File) + fmt.Sprintf(":%d", all[i-1].Line)
		}
		s = append(s, Entry{Pkg: pkg, Func: strings.TrimPrefix(f.Function, module), From: from})
		prev = pkg
	}
	return s
}

// shortFile is a source file's path from the module's root ("harness/
// episode.go"), or its base name outside the module.
func shortFile(f string) string {
	if i := strings.LastIndex(f, "/rollcage/"); i >= 0 {
		// a checkout named rollcage; else fall back to the last two elements
		return f[i+len("/rollcage/"):]
	}
	parts := strings.Split(f, "/")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(parts, "/")
}

// CallPath collects the stacks seen at observation points (a fake
// sandbox's or a fake judge's methods) while tool calls run one at a
// time, grouped by call, to hold each call to one entry per package.
type CallPath struct {
	mu    sync.Mutex
	calls [][]Stack // guarded by mu; per call, the stacks seen
}

// Begin starts the next call's group: the stacks observed from now on
// are the call's.
func (c *CallPath) Begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, nil)
}

// Observe records the caller's stack (skip as for Caller) in the current
// call's group; before the first Begin it records nothing.
func (c *CallPath) Observe(skip int) {
	s := Caller(skip + 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.calls) > 0 {
		c.calls[len(c.calls)-1] = append(c.calls[len(c.calls)-1], s)
	}
}

// Calls are the stacks seen, per call.
func (c *CallPath) Calls() [][]Stack {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// Check reports how one call's stacks break the path: a package entered
// twice on one stack (a layer called back), a package entered from two
// places or by two functions across the call's stacks (a layer entered
// again after it returned), or a stack whose packages are not want, in
// order (want lists the packages down to the observation point).
func Check(stacks []Stack, want []string) []string {
	var problems []string
	entries := map[string]Entry{}
	for _, s := range stacks {
		if !slices.Equal(s.Pkgs(), want) {
			problems = append(problems, fmt.Sprintf("reached %v through %v, want %v", s[len(s)-1].Func, s.Pkgs(), want))
		}
		seen := map[string]bool{}
		for _, e := range s {
			if seen[e.Pkg] {
				problems = append(problems, fmt.Sprintf("entered %s twice on one stack: again at %s", e.Pkg, e))
			}
			seen[e.Pkg] = true
			if prev, ok := entries[e.Pkg]; ok && prev != e {
				problems = append(problems, fmt.Sprintf("entered %s twice: at %s, then at %s", e.Pkg, prev, e))
			}
			entries[e.Pkg] = e
		}
	}
	return problems
}

// ObserveBackend wraps b: the first sandbox it creates (the episode's)
// reports to cp where a tool call reaches it (Exec in the policy's
// sessions, ReadFile, WriteFile), its own frame left out. Other
// sandboxes (grading's) and rollcage's own sessions report nothing.
func ObserveBackend(b sandbox.Backend, cp *CallPath) sandbox.Backend {
	return &observedBackend{Backend: b, cp: cp}
}

type observedBackend struct {
	sandbox.Backend
	cp    *CallPath
	first sync.Once
}

func (b *observedBackend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := b.Backend.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	wrapped := sb
	b.first.Do(func() { wrapped = &observedSandbox{Sandbox: sb, cp: b.cp} })
	return wrapped, nil
}

type observedSandbox struct {
	sandbox.Sandbox
	cp *CallPath
}

func (s *observedSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if !strings.HasPrefix(req.Session, "rollcage-") {
		s.cp.Observe(1)
	}
	return s.Sandbox.Exec(ctx, req)
}

func (s *observedSandbox) ReadFile(ctx context.Context, path string, max int64) ([]byte, bool, error) {
	s.cp.Observe(1)
	return s.Sandbox.ReadFile(ctx, path, max)
}

func (s *observedSandbox) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	s.cp.Observe(1)
	return s.Sandbox.WriteFile(ctx, path, data, mode)
}
