package e2b_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/e2b"
	"github.com/rollcage/rollcage/e2b/envd/process"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/trajectory"
)

// events reads a process stream in the background; got says what came so
// far, stdout and stderr apart.
type events struct {
	mu             sync.Mutex
	pid            uint32
	stdout, stderr string
	end            *process.ProcessEvent_EndEvent
	err            error
	done           chan struct{}
}

func follow[T any](st *connect.ServerStreamForClient[T], ev func(*T) *process.ProcessEvent) *events {
	e := &events{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		defer st.Close()
		for st.Receive() {
			x := ev(st.Msg())
			e.mu.Lock()
			switch {
			case x.GetStart() != nil:
				e.pid = x.GetStart().Pid
			case x.GetData() != nil:
				e.stdout += string(x.GetData().GetStdout())
				e.stderr += string(x.GetData().GetStderr())
			case x.GetEnd() != nil:
				e.end = x.GetEnd()
			}
			e.mu.Unlock()
		}
		e.mu.Lock()
		e.err = st.Err()
		e.mu.Unlock()
	}()
	return e
}

func (e *events) got() (pid uint32, stdout, stderr string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pid, e.stdout, e.stderr
}

func (e *events) wait(t *testing.T) (stdout, stderr string, end *process.ProcessEvent_EndEvent) {
	t.Helper()
	select {
	case <-e.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the process stream did not end")
	}
	if e.err != nil {
		t.Fatalf("stream: %v", e.err)
	}
	return e.stdout, e.stderr, e.end
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func startEvents(ctx context.Context, t *testing.T, c clients, req *process.StartRequest) *events {
	t.Helper()
	st, err := c.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	return follow(st, func(m *process.StartResponse) *process.ProcessEvent { return m.Event })
}

// TestProcessStreams: output comes as it is written, stdout and stderr
// apart, while other processes of the sandbox run to their end; the
// process's pid is the real one; the call is recorded when it ends.
func TestProcessStreams(t *testing.T) {
	e := newEnv(t)
	for _, codec := range codecs {
		t.Run(codec.name, func(t *testing.T) {
			cr := e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"})
			c := e.clients(cr, codec.opts...)
			ctx := context.Background()
			gate := filepath.Join(e.dir, "gate-"+codec.name)
			// The process waits for a gate the test opens only once it saw
			// the first lines: output that came at the end never opens it.
			ev := startEvents(ctx, t, c, &process.StartRequest{Process: bashCfg(fmt.Sprintf(
				"echo first; echo oops >&2; while [ ! -e %s ]; do sleep 0.02; done; echo second", gate))})
			eventually(t, "the first lines", func() bool { _, o, er := ev.got(); return o == "first\n" && er == "oops\n" })
			pid, _, _ := ev.got()
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
				t.Errorf("pid %d is no real process: %v", pid, err)
			}
			// Another process runs to its end beside it.
			if _, out, end, err := run(ctx, t, c, bashCfg("echo beside")); err != nil || out != "beside\n" || end.ExitCode != 0 {
				t.Fatalf("a process beside a running one: %q %v %v", out, end, err)
			}
			os.WriteFile(gate, nil, 0o644)
			stdout, stderr, end := ev.wait(t)
			if stdout != "first\nsecond\n" || stderr != "oops\n" || end == nil || end.ExitCode != 0 {
				t.Errorf("stdout %q, stderr %q, end %v", stdout, stderr, end)
			}
			var outputs []string
			e.store.Read(ctx, cr.SandboxID, 0, func(ev trajectory.Event) error {
				if ev.Type == trajectory.TypeToolOutput {
					var o trajectory.ToolOutput
					if err := ev.Decode(&o); err != nil {
						return err
					}
					outputs = append(outputs, o.Output)
				}
				return nil
			})
			if len(outputs) != 2 || outputs[0] != "beside\n" || !strings.Contains(outputs[1], "second") {
				t.Errorf("recorded outputs %q: want the one beside, then the streamed one", outputs)
			}
		})
	}
}

// TestProcessInput: stdin after start by SendInput and StreamInput,
// CloseStdin, and input the rules refuse.
func TestProcessInput(t *testing.T) {
	e := newEnv(t)
	for _, codec := range codecs {
		t.Run(codec.name, func(t *testing.T) {
			c := e.clients(e.create(keyA, map[string]string{e2b.MetaTask: boundTask.ID}), codec.opts...)
			ctx := context.Background()
			yes := true
			ev := startEvents(ctx, t, c, &process.StartRequest{Process: bashCfg("read l; echo got:$l; cat; echo closed"), Stdin: &yes})
			eventually(t, "the start", func() bool { pid, _, _ := ev.got(); return pid != 0 })
			pid, _, _ := ev.got()
			sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
			if _, err := c.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel,
				Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("one\n")}}})); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the echo of the input", func() bool { _, o, _ := ev.got(); return o == "got:one\n" })
			_, err := c.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel,
				Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("cat /opt/grader/tests/test_x.py\n")}}}))
			if connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Errorf("input reading the hidden tests: %v, want permission_denied", err)
			}
			if codec.name == "proto" { // StreamInput is a client stream: JSON-over-HTTP/1.1 clients cannot send one
				is := c.proc.StreamInput(ctx)
				is.Send(&process.StreamInputRequest{Event: &process.StreamInputRequest_Start{Start: &process.StreamInputRequest_StartEvent{Process: sel}}})
				is.Send(&process.StreamInputRequest{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{
					Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("two\n")}}}}})
				if _, err := is.CloseAndReceive(); err != nil {
					t.Fatalf("stream input: %v", err)
				}
				eventually(t, "the streamed input", func() bool { _, o, _ := ev.got(); return o == "got:one\ntwo\n" })
			}
			if _, err := c.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); err != nil {
				t.Fatal(err)
			}
			stdout, _, end := ev.wait(t)
			if !strings.HasSuffix(stdout, "closed\n") || end.ExitCode != 0 {
				t.Errorf("after close: %q, %v", stdout, end)
			}
			// Without stdin at start there is none to write to.
			ev = startEvents(ctx, t, c, &process.StartRequest{Process: bashCfg("sleep 2")})
			eventually(t, "the start", func() bool { pid, _, _ := ev.got(); return pid != 0 })
			pid, _, _ = ev.got()
			_, err = c.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}},
				Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("x")}}}))
			if connect.CodeOf(err) != connect.CodeFailedPrecondition {
				t.Errorf("input to a process without stdin: %v, want failed_precondition", err)
			}
			ev.wait(t)
		})
	}
}

// TestProcessSignalReal: SIGTERM reaches the real process group; Connect
// by pid replays what the process wrote and follows it live.
func TestProcessSignalReal(t *testing.T) {
	e := newEnv(t)
	c := e.clients(e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"}))
	ctx := context.Background()
	sctx, cancel := context.WithCancel(ctx)
	ev := startEvents(sctx, t, c, &process.StartRequest{Process: bashCfg("echo up; sleep 30 & wait")})
	eventually(t, "the first line", func() bool { _, o, _ := ev.got(); return o == "up\n" })
	pid, _, _ := ev.got()
	cancel() // the start stream goes; the process stays
	cs, err := c.proc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}}))
	if err != nil {
		t.Fatal(err)
	}
	re := follow(cs, func(m *process.ConnectResponse) *process.ProcessEvent { return m.Event })
	eventually(t, "the replayed line", func() bool { _, o, _ := re.got(); return o == "up\n" })
	if _, err := c.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{
		Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}, Signal: process.Signal_SIGNAL_SIGTERM})); err != nil {
		t.Fatal(err)
	}
	_, _, end := re.wait(t)
	if end == nil || end.Exited || end.Status != "signal: terminated" {
		t.Errorf("after SIGTERM: %v", end)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		eventually(t, "the process to be gone", func() bool { _, err := os.Stat(fmt.Sprintf("/proc/%d/stat", pid)); return err != nil || isZombie(pid) })
	}
}

func isZombie(pid uint32) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestSubmitKillsRunningProcesses: grading never begins with a process of
// the policy still running; the killed process is recorded (its
// tool_output) before the episode's end.
func TestSubmitKillsRunningProcesses(t *testing.T) {
	e := newEnv(t)
	bound := e.create(keyA, map[string]string{e2b.MetaTask: boundTask.ID})
	c := e.clients(bound)
	ev := startEvents(context.Background(), t, c, &process.StartRequest{Process: bashCfg("echo running; sleep 30")})
	eventually(t, "the process to run", func() bool { _, o, _ := ev.got(); return o == "running\n" })
	pid, _, _ := ev.got()
	t0 := time.Now()
	var o harness.Outcome
	if code, _ := e.do("POST", "/sandboxes/"+bound.SandboxID+"/rollcage/submit", keyA, nil, &o); code != 200 {
		t.Fatalf("submit: %d %+v", code, o)
	}
	if time.Since(t0) > 20*time.Second {
		t.Errorf("submit took %v: it waited for the process instead of killing it", time.Since(t0))
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil && !isZombie(pid) {
		t.Errorf("process %d still runs after the submit", pid)
	}
	var order []string
	e.store.Read(context.Background(), bound.SandboxID, 0, func(ev trajectory.Event) error {
		switch ev.Type {
		case trajectory.TypeToolOutput:
			var out trajectory.ToolOutput
			if err := ev.Decode(&out); err != nil {
				return err
			}
			order = append(order, fmt.Sprintf("output %q exit %d", out.Output, out.ExitCode))
		case trajectory.TypeGrade, trajectory.TypeEpisodeEnd: // a grade would show between the two
			order = append(order, ev.Type)
		}
		return nil
	})
	// The submit is a call of its own; the process it found running is
	// killed and recorded by Finish before it grades (the host sandboxes
	// here record no grade) and ends the episode.
	want := []string{`output "submitted" exit 0`, `output "running\n" exit 137`, trajectory.TypeEpisodeEnd}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}
}

// TestExecTimeout: a process the monitor's exec timeout kills before
// the request's own deadline (or with none) ends in an error naming that
// limit, not as if it exited.
func TestExecTimeout(t *testing.T) {
	e := newEnvMonitor(t, monitor.Config{ExecTimeout: time.Second}, func(*e2b.Config) {})
	c := e.clients(e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"}))
	for _, tc := range []struct {
		name     string
		deadline time.Duration // 0: none
		msg      string
	}{
		{name: "exec timeout first", deadline: 30 * time.Second, msg: "ran past rollcage's exec timeout (1s, the most one process runs"},
		{name: "no deadline", msg: "ran past rollcage's exec timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			_, _, end, err := run(ctx, t, c, bashCfg("sleep 5; echo done"))
			if connect.CodeOf(err) != connect.CodeDeadlineExceeded || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("end %v, error %v; want deadline_exceeded saying %q", end, err, tc.msg)
			}
		})
	}
}
