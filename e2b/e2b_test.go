package e2b_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/rollcage/rollcage/e2b"
	"github.com/rollcage/rollcage/e2b/envd/filesystem"
	"github.com/rollcage/rollcage/e2b/envd/filesystem/filesystemconnect"
	"github.com/rollcage/rollcage/e2b/envd/process"
	"github.com/rollcage/rollcage/e2b/envd/process/processconnect"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/harness/harnesstest"
	"github.com/rollcage/rollcage/internal/memnet"
	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/server"
	"github.com/rollcage/rollcage/task"
	"github.com/rollcage/rollcage/toolcall"
	"github.com/rollcage/rollcage/trajectory"
)

const (
	keyA = "e2b_00000000000000000000000000000000000000aa"
	keyB = "e2b_00000000000000000000000000000000000000bb"
)

var boundTask = task.Task{
	ID: "fake-task", Image: "rollcage/fake:latest", Instruction: "Fix it.", Workdir: "/workspace",
	HiddenTests: "hidden/fake", HiddenTestsDest: "/opt/grader/tests", TestCommand: "true", Reward: task.RewardSummary,
}

// env is the E2B API over the real gateway, harness, monitor (default
// rules, no judge) and store, on host sandboxes.
type env struct {
	t     *testing.T
	api   *e2b.Server
	url   string
	hc    *http.Client      // reaches url
	rt    http.RoundTripper // hc's transport
	dir   string            // the sandboxes' shared host directory
	store *trajectory.Store
}

func newEnv(t *testing.T, tweak ...func(*server.Config)) *env {
	t.Helper()
	return newEnvWith(t, func(*e2b.Config) {}, tweak...)
}

func newEnvWith(t *testing.T, apiTweak func(*e2b.Config), tweak ...func(*server.Config)) *env {
	t.Helper()
	return newEnvMonitor(t, monitor.Config{}, apiTweak, tweak...)
}

// newEnvMonitor is newEnvWith with the monitor's configuration.
func newEnvMonitor(t *testing.T, mcfg monitor.Config, apiTweak func(*e2b.Config), tweak ...func(*server.Config)) *env {
	t.Helper()
	return newEnvOn(t, envOptions{monitor: mcfg, api: apiTweak}, tweak...)
}

// newBubbleEnv is newEnv on memnet instead of loopback, for a test inside
// a synctest bubble: the reapers' tickers and the sandboxes' timeouts run
// on the bubble's clock.
func newBubbleEnv(t *testing.T, tweak ...func(*server.Config)) *env {
	t.Helper()
	return newEnvOn(t, envOptions{inMemory: true}, tweak...)
}

type envOptions struct {
	inMemory bool // memnet instead of loopback
	monitor  monitor.Config
	api      func(*e2b.Config)   // nil: none
	backend  func(*fake.Backend) // changes hostBackend; nil: none
}

func newEnvOn(t *testing.T, o envOptions, tweak ...func(*server.Config)) *env {
	t.Helper()
	mon, st := harnesstest.Monitor(t, o.monitor), harnesstest.Store(t)
	dir := t.TempDir()
	be := hostBackend(dir)
	if o.backend != nil {
		o.backend(be)
	}
	r, err := harness.NewRunner(harness.Config{Backend: be, Monitor: mon, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Runner: r, Store: st, Tasks: []task.Task{boundTask},
		Hidden: fstest.MapFS{"hidden/fake/test_x.py": {Data: []byte("def test_x():\n    assert True\n")}}}
	for _, f := range tweak {
		f(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	acfg := e2b.Config{Episodes: srv, APIKeys: map[string]string{keyA: "a", keyB: "b"}, ImageKeys: []string{"image"}}
	if o.api != nil {
		o.api(&acfg)
	}
	api, err := e2b.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, api: api, dir: dir, store: st}
	if o.inMemory {
		ms := memnet.NewServer(t, api)
		e.url, e.hc, e.rt = ms.URL, ms.Client, ms.Transport
	} else {
		hs := httptest.NewServer(api)
		t.Cleanup(hs.Close)
		e.url, e.hc, e.rt = hs.URL, http.DefaultClient, http.DefaultTransport
	}
	t.Cleanup(func() {
		api.Close(context.Background())
		srv.Shutdown(context.Background())
	})
	return e
}

// do sends a control-plane request with key and decodes the answer.
func (e *env) do(method, path, key string, body any, out any) (int, http.Header) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode, resp.Header
}

type created struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	ClientID        string            `json:"clientID"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken"`
	Metadata        map[string]string `json:"metadata"`
	Code            int               `json:"code"`
	Message         string            `json:"message"`
}

func (e *env) create(key string, metadata map[string]string) created {
	e.t.Helper()
	var c created
	code, _ := e.do("POST", "/v2/sandboxes", key, map[string]any{"templateID": "base", "metadata": metadata,
		"envVars": map[string]string{"SBX_VAR": "from-create"}, "timeout": 60}, &c)
	if code != http.StatusCreated {
		e.t.Fatalf("create: %d %+v", code, c)
	}
	return c
}

// sandboxHeaders routes every envd request to one sandbox, as the SDKs
// do with E2B_SANDBOX_URL set.
type sandboxHeaders struct {
	id, token, user string
	base            http.RoundTripper // nil: http.DefaultTransport
}

func (h sandboxHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", h.id)
	r.Header.Set("X-Access-Token", h.token)
	if h.user != "" {
		r.SetBasicAuth(h.user, "")
	}
	if h.base != nil {
		return h.base.RoundTrip(r)
	}
	return http.DefaultTransport.RoundTrip(r)
}

type clients struct {
	proc processconnect.ProcessClient
	fs   filesystemconnect.FilesystemClient
	http *http.Client
}

var codecs = []struct {
	name string
	opts []connect.ClientOption
}{
	{"proto", nil},
	{"json", []connect.ClientOption{connect.WithProtoJSON()}},
}

func (e *env) clients(c created, opts ...connect.ClientOption) clients {
	hc := &http.Client{Transport: sandboxHeaders{id: c.SandboxID, token: c.EnvdAccessToken, user: "user", base: e.rt}}
	return clients{proc: processconnect.NewProcessClient(hc, e.url, opts...), fs: filesystemconnect.NewFilesystemClient(hc, e.url, opts...), http: hc}
}

// eachCodec runs fn as a subtest per codec, with clients of a new
// sandbox of rollcage/plain:latest speaking it.
func (e *env) eachCodec(t *testing.T, fn func(t *testing.T, codec string, c clients)) {
	for _, codec := range codecs {
		t.Run(codec.name, func(t *testing.T) {
			fn(t, codec.name, e.clients(e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"}), codec.opts...))
		})
	}
}

// run starts a command the way commands.run does and collects its stream.
func run(ctx context.Context, t *testing.T, c clients, cfg *process.ProcessConfig) (pid uint32, out string, end *process.ProcessEvent_EndEvent, err error) {
	t.Helper()
	st, err := c.proc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: cfg}))
	if err != nil {
		return 0, "", nil, err
	}
	defer st.Close()
	first := true
	var stderr string
	for st.Receive() {
		ev := st.Msg().Event
		if first && ev.GetStart() == nil {
			t.Fatalf("first event is %v, want start", ev)
		}
		first = false
		switch {
		case ev.GetStart() != nil:
			pid = ev.GetStart().Pid
		case ev.GetData() != nil:
			out += string(ev.GetData().GetStdout())
			stderr += string(ev.GetData().GetStderr())
		case ev.GetEnd() != nil:
			end = ev.GetEnd()
		}
	}
	// stdout, then stderr: the two come on their own pipes, in no order
	// between them.
	return pid, out + stderr, end, st.Err()
}

func bashCfg(cmd string) *process.ProcessConfig {
	return &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}}
}

func TestProcessStart(t *testing.T) {
	e := newEnv(t)
	e.eachCodec(t, func(t *testing.T, codec string, c clients) {
		ctx := context.Background()
		sub := filepath.Join(e.dir, "sub-"+codec)
		os.MkdirAll(sub, 0o755)
		cwd := sub
		tests := []struct {
			name     string
			cfg      *process.ProcessConfig
			wantOut  string
			wantCode int32
		}{
			{"echo", bashCfg("echo hello"), "hello\n", 0},
			{"exit code", bashCfg("echo out; echo err >&2; exit 3"), "out\nerr\n", 3},
			{"envs", &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", `echo "$A $SBX_VAR"`}, Envs: map[string]string{"A": "it's"}}, "it's from-create\n", 0},
			{"cwd", &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "pwd"}, Cwd: &cwd}, sub + "\n", 0},
			{"cwd does not leak", bashCfg("pwd"), e.dir + "\n", 0},
			{"argv", &process.ProcessConfig{Cmd: "printf", Args: []string{"%s|", "a b", "c"}}, "a b|c|", 0},
		}
		for _, tc := range tests {
			_, out, end, err := run(ctx, t, c, tc.cfg)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if out != tc.wantOut || end == nil || end.ExitCode != tc.wantCode || !end.Exited {
				t.Errorf("%s: got %q, end %v; want %q, exit %d", tc.name, out, end, tc.wantOut, tc.wantCode)
			}
			if tc.wantCode != 0 && end.GetError() != fmt.Sprintf("exit status %d", tc.wantCode) {
				t.Errorf("%s: end.error %q", tc.name, end.GetError())
			}
		}
	})
}

// TestProcessIsMonitored: a process start is a bash call through the
// monitor, flagged like one from /calls. (The Docker test with the real
// SDK sees a block on a task image come back as dummy output.)
func TestProcessIsMonitored(t *testing.T) {
	e := newEnv(t)
	cr := e.create(keyA, map[string]string{"image": "rollcage/plain:latest"}) // the configured image key
	c := e.clients(cr)
	if _, _, end, err := run(context.Background(), t, c, bashCfg("git log --all --oneline")); err != nil || end == nil {
		t.Fatalf("run: %v %v", end, err)
	}
	var decisions []trajectory.Decision
	e.store.Read(context.Background(), cr.SandboxID, 0, func(ev trajectory.Event) error {
		if ev.Type == trajectory.TypeDecision {
			var d trajectory.Decision
			json.Unmarshal(ev.Data, &d)
			decisions = append(decisions, d)
		}
		return nil
	})
	if len(decisions) != 1 || !strings.Contains(string(decisions[0].Flags), `"history.all_refs"`) {
		t.Fatalf("decisions %+v: want one, flagged history.all_refs", decisions)
	}
	var call toolcall.Call
	json.Unmarshal(decisions[0].Call, &call)
	if call.Tool != toolcall.Bash || call.Session != "e2b" {
		t.Errorf("recorded call %+v", call)
	}
}

func TestProcessConnectListSignal(t *testing.T) {
	e := newEnv(t)
	e.eachCodec(t, func(t *testing.T, codec string, c clients) {
		ctx := context.Background()
		// A background process: its start stream is dropped after the
		// start event; it runs on and is reattached by tag.
		tag := "bg"
		sctx, cancel := context.WithCancel(ctx)
		st, err := c.proc.Start(sctx, connect.NewRequest(&process.StartRequest{Process: bashCfg("sleep 1; echo late"), Tag: &tag}))
		if err != nil {
			t.Fatal(err)
		}
		if !st.Receive() || st.Msg().Event.GetStart() == nil {
			t.Fatalf("no start event: %v", st.Err())
		}
		pid := st.Msg().Event.GetStart().Pid
		cancel()
		st.Close()
		list, err := c.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Msg.Processes) != 1 || list.Msg.Processes[0].Pid != pid || list.Msg.Processes[0].GetTag() != tag ||
			list.Msg.Processes[0].Config.Args[2] != "sleep 1; echo late" {
			t.Fatalf("list: %v", list.Msg.Processes)
		}
		cs, err := c.proc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: tag}}}))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for cs.Receive() {
			ev := cs.Msg().Event
			switch {
			case ev.GetStart() != nil:
				got = append(got, fmt.Sprintf("start %v", ev.GetStart().Pid == pid))
			case ev.GetData() != nil:
				got = append(got, "data "+string(ev.GetData().GetStdout()))
			case ev.GetEnd() != nil:
				got = append(got, fmt.Sprintf("end %d", ev.GetEnd().ExitCode))
			}
		}
		if err := cs.Err(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"start true", "data late\n", "end 0"}, got); diff != "" {
			t.Errorf("reattached stream (-want +got):\n%s", diff)
		}
		// A finished process is gone.
		_, err = c.proc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}}))
		if err == nil {
			_, err = drain(c.proc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}})))
		}
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("connect to an ended pid: %v, want not_found", err)
		}

		// SendSignal ends a running process with envd's killed status.
		done := make(chan *process.ProcessEvent_EndEvent, 1)
		started := make(chan uint32, 1)
		go func() {
			st, err := c.proc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: bashCfg("sleep 30")}))
			if err != nil {
				done <- nil
				return
			}
			for st.Receive() {
				if s := st.Msg().Event.GetStart(); s != nil {
					started <- s.Pid
				}
				if end := st.Msg().Event.GetEnd(); end != nil {
					done <- end
					return
				}
			}
			done <- nil
		}()
		spid := <-started
		t0 := time.Now()
		if _, err := c.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{
			Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: spid}}, Signal: process.Signal_SIGNAL_SIGKILL})); err != nil {
			t.Fatal(err)
		}
		end := <-done
		if end == nil || end.Exited || end.Status != "signal: killed" || time.Since(t0) > 20*time.Second {
			t.Errorf("killed process ended with %v after %v", end, time.Since(t0))
		}
		_, err = c.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{
			Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: 99999}}, Signal: process.Signal_SIGNAL_SIGTERM}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("signal to an unknown pid: %v, want not_found", err)
		}
		for name, err := range map[string]error{
			"Update": second(c.proc.Update(ctx, connect.NewRequest(&process.UpdateRequest{}))),
			"PTY start": func() error {
				_, err := drain(c.proc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: bashCfg("true"), Pty: &process.PTY{}})))
				return err
			}(),
		} {
			if connect.CodeOf(err) != connect.CodeUnimplemented {
				t.Errorf("%s: %v, want unimplemented", name, err)
			}
		}
	})
}

func second[T any](_ T, err error) error { return err }

// drain reads a stream to its end.
func drain[T any](st *connect.ServerStreamForClient[T], err error) (int, error) {
	if err != nil {
		return 0, err
	}
	defer st.Close()
	n := 0
	for st.Receive() {
		n++
	}
	return n, st.Err()
}

func TestProcessDeadline(t *testing.T) {
	e := newEnv(t)
	c := e.clients(e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"}))
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, _, _, err := run(ctx, t, c, bashCfg("sleep 20"))
	if c := connect.CodeOf(err); c != connect.CodeDeadlineExceeded && c != connect.CodeCanceled {
		t.Errorf("sleep past the deadline: %v", err)
	}
	if time.Since(t0) > 10*time.Second {
		t.Errorf("took %v", time.Since(t0))
	}
	// The sandbox still takes calls.
	if _, out, _, err := run(context.Background(), t, c, bashCfg("echo ok")); err != nil || out != "ok\n" {
		t.Errorf("after a timeout: %q %v", out, err)
	}
}

func TestFilesystem(t *testing.T) {
	e := newEnv(t)
	e.eachCodec(t, func(t *testing.T, codec string, c clients) {
		ctx := context.Background()
		root := filepath.Join(e.dir, "fs-"+codec)
		mk, err := c.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: root + "/a/b"}))
		if err != nil {
			t.Fatal(err)
		}
		if mk.Msg.Entry.Type != filesystem.FileType_FILE_TYPE_DIRECTORY || mk.Msg.Entry.Name != "b" || mk.Msg.Entry.Path != root+"/a/b" {
			t.Errorf("make dir: %v", mk.Msg.Entry)
		}
		_, err = c.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: root + "/a/b"}))
		if connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Errorf("make dir twice: %v, want already_exists", err)
		}
		os.WriteFile(root+"/a/f.txt", []byte("12345"), 0o640)
		os.Symlink("f.txt", root+"/a/link")
		st, err := c.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: root + "/a/f.txt"}))
		if err != nil {
			t.Fatal(err)
		}
		if en := st.Msg.Entry; en.Type != filesystem.FileType_FILE_TYPE_FILE || en.Size != 5 || en.Permissions != "-rw-r-----" || en.Mode != 0o640 ||
			en.Owner == "" || time.Since(en.ModifiedTime.AsTime()) > time.Minute {
			t.Errorf("stat: %v", en)
		}
		_, err = c.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: root + "/nope"}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("stat missing: %v, want not_found", err)
		}
		ls, err := c.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: root + "/a", Depth: 1}))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, en := range ls.Msg.Entries {
			got[en.Name] = en.Type.String() + " " + en.GetSymlinkTarget()
		}
		want := map[string]string{"b": "FILE_TYPE_DIRECTORY ", "f.txt": "FILE_TYPE_FILE ", "link": "FILE_TYPE_SYMLINK f.txt"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("list (-want +got):\n%s", diff)
		}
		_, err = c.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: root + "/a/f.txt"}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("list a file: %v, want invalid_argument", err)
		}
		mv, err := c.fs.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: root + "/a/f.txt", Destination: root + "/c/g.txt"}))
		if err != nil {
			t.Fatal(err)
		}
		if mv.Msg.Entry.Path != root+"/c/g.txt" || mv.Msg.Entry.Size != 5 {
			t.Errorf("move: %v", mv.Msg.Entry)
		}
		if _, err := c.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: root + "/a"})); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(root + "/a"); err == nil {
			t.Error("remove left the directory")
		}
		_, err = c.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: root + "/a"}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("remove missing: %v, want not_found", err)
		}
		_, err = drain(c.fs.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: root})))
		if connect.CodeOf(err) != connect.CodeFailedPrecondition {
			t.Errorf("watch outside the workspace: %v, want failed_precondition", err)
		}
		// A listing over the monitor's output bound is an error naming it,
		// never the entries that fit as if they were all.
		many := filepath.Join(root, "many")
		os.MkdirAll(many, 0o755)
		for i := range 600 {
			os.WriteFile(filepath.Join(many, fmt.Sprintf("file-with-a-long-name-%04d.txt", i)), nil, 0o644)
		}
		_, err = c.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: many, Depth: 1}))
		if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "over the monitor's output bound") {
			t.Errorf("list of 600 entries: %v, want failed_precondition naming the output bound", err)
		}
	})
}

func TestFiles(t *testing.T) {
	e := newEnv(t)
	cr := e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"})
	c := e.clients(cr)
	p := filepath.Join(e.dir, "up", "x.txt")
	send := func(method, query, ctype string, body io.Reader) (int, string) {
		req, _ := http.NewRequest(method, e.url+"/files?"+query, body)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// multipart, the path in the query
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("file", p)
	fw.Write([]byte("multi\n"))
	mw.Close()
	if code, body := send("POST", "path="+p+"&username=user", mw.FormDataContentType(), &mp); code != 200 ||
		body != fmt.Sprintf(`[{"name":"x.txt","type":"file","path":%q}]`, p) {
		t.Fatalf("multipart upload: %d %s", code, body)
	}
	if code, body := send("GET", "path="+p, "", nil); code != 200 || body != "multi\n" {
		t.Errorf("download: %d %q", code, body)
	}
	// several files in one multipart body, each named by its part's
	// filename (writeFiles)
	var mp2 bytes.Buffer
	mw2 := multipart.NewWriter(&mp2)
	for i, name := range []string{p + ".1", p + ".2"} {
		fw, _ := mw2.CreateFormFile("file", name)
		fmt.Fprintf(fw, "part %d", i)
	}
	mw2.Close()
	if code, body := send("POST", "username=user", mw2.FormDataContentType(), &mp2); code != 200 ||
		body != fmt.Sprintf(`[{"name":"x.txt.1","type":"file","path":%q},{"name":"x.txt.2","type":"file","path":%q}]`, p+".1", p+".2") {
		t.Fatalf("multi-file upload: %d %s", code, body)
	}
	if b, _ := os.ReadFile(p + ".2"); string(b) != "part 1" {
		t.Errorf("second part wrote %q", b)
	}
	// octet-stream
	if code, body := send("POST", "path="+p, "application/octet-stream", strings.NewReader("raw")); code != 200 || !strings.Contains(body, `"x.txt"`) {
		t.Fatalf("octet upload: %d %s", code, body)
	}
	if code, body := send("GET", "path="+p, "", nil); code != 200 || body != "raw" {
		t.Errorf("download: %d %q", code, body)
	}
	// Any bytes upload as they are, octet-stream and multipart alike.
	binary := []byte{0x7f, 'E', 'L', 'F', 0xff, 0xfe, 0x00, '\n', 0xc3}
	if code, body := send("POST", "path="+p+".bin1", "application/octet-stream", bytes.NewReader(binary)); code != 200 || !strings.Contains(body, `"x.txt.bin1"`) {
		t.Errorf("binary octet-stream upload: %d %s", code, body)
	}
	var mp3 bytes.Buffer
	mw3 := multipart.NewWriter(&mp3)
	fw3, _ := mw3.CreateFormFile("file", p+".bin2")
	fw3.Write(binary)
	mw3.Close()
	if code, body := send("POST", "", mw3.FormDataContentType(), &mp3); code != 200 || !strings.Contains(body, `"x.txt.bin2"`) {
		t.Errorf("binary multipart upload: %d %s", code, body)
	}
	for _, f := range []string{p + ".bin1", p + ".bin2"} {
		if got, err := os.ReadFile(f); err != nil || !bytes.Equal(got, binary) {
			t.Errorf("%s holds %q (%v), want the uploaded bytes %q", f, got, err, binary)
		}
	}
	if code, body := send("GET", "path="+p+".missing", "", nil); code != 404 || !strings.Contains(body, `"code":404`) {
		t.Errorf("missing download: %d %s", code, body)
	}
	req, _ := http.NewRequest("GET", e.url+"/health", nil)
	if resp, err := c.http.Do(req); err != nil || resp.StatusCode != 204 {
		t.Errorf("health: %v %v", resp, err)
	}
	// Both writes and the reads are the episode's calls.
	var tools []string
	for _, call := range e.calls(cr.SandboxID) {
		tools = append(tools, call.Tool)
	}
	if diff := cmp.Diff([]string{"write_file", "read_file", "write_file", "write_file", "write_file", "read_file", "write_file", "write_file", "read_file"}, tools); diff != "" {
		t.Errorf("recorded calls (-want +got):\n%s", diff)
	}
}

func TestEnvdAuth(t *testing.T) {
	e := newEnv(t)
	a := e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"})
	b := e.create(keyB, map[string]string{e2b.MetaImage: "rollcage/plain:latest"})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		h    sandboxHeaders
		want connect.Code
	}{
		{"own token", sandboxHeaders{id: a.SandboxID, token: a.EnvdAccessToken}, 0},
		{"no token", sandboxHeaders{id: a.SandboxID}, connect.CodeUnauthenticated},
		{"another sandbox's token", sandboxHeaders{id: a.SandboxID, token: b.EnvdAccessToken}, connect.CodeUnauthenticated},
		{"unknown sandbox", sandboxHeaders{id: "inope", token: a.EnvdAccessToken}, connect.CodeUnavailable},
	} {
		pc := processconnect.NewProcessClient(&http.Client{Transport: tc.h}, e.url)
		_, err := pc.List(ctx, connect.NewRequest(&process.ListRequest{}))
		if connect.CodeOf(err) != tc.want && !(tc.want == 0 && err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// The host name form routes too: {port}-{id}.{domain}.
	req, _ := http.NewRequest("POST", e.url+"/process.Process/List", strings.NewReader("{}"))
	req.Host = "49983-" + a.SandboxID + ".rollcage.test"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Access-Token", a.EnvdAccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("routed by host: %v %v", resp, err)
	}
	// After kill, envd answers 502 (the SDKs: sandbox was killed).
	if code, _ := e.do("DELETE", "/sandboxes/"+a.SandboxID, keyA, nil, nil); code != 204 {
		t.Fatalf("kill: %d", code)
	}
	pc := processconnect.NewProcessClient(&http.Client{Transport: sandboxHeaders{id: a.SandboxID, token: a.EnvdAccessToken}}, e.url)
	if _, err := pc.List(ctx, connect.NewRequest(&process.ListRequest{})); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("after kill: %v, want unavailable", err)
	}
}

// TestControlPlane runs in a synctest bubble: the one-second timeout and
// the reaper's ticks are on the bubble's clock.
func TestControlPlane(t *testing.T) { synctest.Test(t, testControlPlane) }

func testControlPlane(t *testing.T) {
	start := time.Now()
	e := newBubbleEnv(t)
	if code, _ := e.do("POST", "/v2/sandboxes", "", map[string]any{}, nil); code != 401 {
		t.Errorf("no key: %d", code)
	}
	if code, _ := e.do("POST", "/v2/sandboxes", "e2b_0000000000000000000000000000000000000000", map[string]any{}, nil); code != 401 {
		t.Errorf("unknown key: %d", code)
	}
	var bad created
	if code, _ := e.do("POST", "/v2/sandboxes", keyA, map[string]any{"templateID": "base"}, &bad); code != 400 || !strings.Contains(bad.Message, "rollcage/image") {
		t.Errorf("no image: %d %+v", code, bad)
	}
	a1 := e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest", "run": "1"})
	a2 := e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest", "run": "2"})
	b1 := e.create(keyB, map[string]string{e2b.MetaImage: "rollcage/plain:latest", "run": "1"})
	if a1.EnvdVersion != e2b.EnvdVersion || a1.TemplateID != "base" || a1.ClientID != "a" || !strings.HasPrefix(a1.EnvdAccessToken, "rce_") {
		t.Errorf("create: %+v", a1)
	}
	// v1 path too
	var a3 created
	if code, _ := e.do("POST", "/sandboxes", keyA, map[string]any{"templateID": "rollcage/plain:latest"}, &a3); code != 201 {
		t.Errorf("POST /sandboxes with an image as template: %d %+v", code, a3)
	}

	var info map[string]any
	if code, _ := e.do("GET", "/sandboxes/"+a1.SandboxID, keyA, nil, &info); code != 200 || info["state"] != "running" || info["sandboxID"] != a1.SandboxID {
		t.Errorf("info: %d %v", code, info)
	}
	var nf created
	if code, _ := e.do("GET", "/sandboxes/"+b1.SandboxID, keyA, nil, &nf); code != 404 || nf.Code != 404 {
		t.Errorf("another client's sandbox: %d %+v", code, nf)
	}

	var list []created
	code, h := e.do("GET", "/v2/sandboxes?metadata=run%3D1", keyA, nil, &list)
	if code != 200 || len(list) != 1 || list[0].SandboxID != a1.SandboxID || list[0].EnvdAccessToken != "" {
		t.Errorf("list run=1: %d %+v", code, list)
	}
	if h.Get("X-Next-Token") != "" {
		t.Errorf("one page, yet X-Next-Token %q", h.Get("X-Next-Token"))
	}
	var ids []string
	next := ""
	for range 5 {
		var page []created
		_, h := e.do("GET", "/v2/sandboxes?limit=1&nextToken="+next, keyA, nil, &page)
		for _, p := range page {
			ids = append(ids, p.SandboxID)
		}
		if next = h.Get("X-Next-Token"); next == "" {
			break
		}
	}
	if len(ids) != 3 || !strings.Contains(strings.Join(ids, ","), a2.SandboxID) {
		t.Errorf("paged list: %v", ids)
	}

	if time.Since(start) != 0 {
		t.Fatalf("%v passed on the bubble's clock before the timeout was set: the reaper's ticks (every second from the start) are no longer in step with it", time.Since(start))
	}
	if code, _ := e.do("POST", "/sandboxes/"+a1.SandboxID+"/timeout", keyA, map[string]int{"timeout": 1}, nil); code != 204 {
		t.Errorf("timeout: %d", code)
	}
	var conn created
	if code, _ := e.do("POST", "/v2/sandboxes/"+a2.SandboxID+"/connect", keyA, map[string]int{"timeout": 30}, &conn); code != 200 || conn.EnvdAccessToken != a2.EnvdAccessToken {
		t.Errorf("connect: %d %+v", code, conn)
	}
	var pause created
	if code, _ := e.do("POST", "/sandboxes/"+a2.SandboxID+"/pause", keyA, nil, &pause); code != 501 || pause.Code != 501 {
		t.Errorf("pause: %d %+v", code, pause)
	}
	// The timed-out sandbox is killed by the reaper's first tick at or
	// past its timeout: here the one at 1 s.
	time.Sleep(time.Second - time.Millisecond)
	synctest.Wait()
	if code, _ := e.do("GET", "/sandboxes/"+a1.SandboxID, keyA, nil, nil); code != 200 {
		t.Errorf("sandbox before its timeout: %d, want 200", code)
	}
	time.Sleep(2 * time.Millisecond)
	synctest.Wait()
	if code, _ := e.do("GET", "/sandboxes/"+a1.SandboxID, keyA, nil, nil); code != 404 {
		t.Errorf("sandbox past its timeout and the reaper's tick: %d, want 404", code)
	}
	if code, _ := e.do("DELETE", "/sandboxes/"+a2.SandboxID, keyB, nil, nil); code != 404 {
		t.Errorf("kill by another client: %d", code)
	}
	if code, _ := e.do("DELETE", "/sandboxes/"+a2.SandboxID, keyA, nil, nil); code != 204 {
		t.Errorf("kill: %d", code)
	}
	var again created
	if code, _ := e.do("DELETE", "/sandboxes/"+a2.SandboxID, keyA, nil, &again); code != 404 || again.Code != 404 {
		t.Errorf("kill twice: %d %+v", code, again)
	}
	// Killed sandboxes are episodes closed without grading.
	for _, id := range []string{a1.SandboxID, a2.SandboxID} {
		var end trajectory.EpisodeEnd
		end.Reason = ""
		e.store.Read(context.Background(), id, 0, func(ev trajectory.Event) error {
			if ev.Type == trajectory.TypeEpisodeEnd {
				json.Unmarshal(ev.Data, &end)
			}
			return nil
		})
		if end.Reason == "" {
			t.Errorf("%s: no episode_end with a reason", id)
		}
	}
}

// TestControlPlaneClientErrors: a create naming an image the host does
// not have, and a path with a '.', '..' or empty segment, are client
// errors (400) in E2B's JSON, not a 502 or the mux's HTML redirect.
func TestControlPlaneClientErrors(t *testing.T) {
	e := newEnv(t)
	img := missingImages + "nope:latest"
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		name, method, path string
		body               any
		msg                []string
	}{
		{"missing image", "POST", "/v2/sandboxes", map[string]any{"templateID": "base", "metadata": map[string]string{e2b.MetaImage: img}},
			[]string{"image " + img + " is not on the sandbox host", "docker build -t " + img}},
		{"bad model route", "POST", "/v2/sandboxes", map[string]any{"templateID": "base", "metadata": map[string]string{e2b.MetaImage: "rollcage/plain:latest", e2b.MetaModelRoute: "http://adapter:8000/v1, ftp://adapter/v1"}},
			[]string{`metadata "rollcage/model_route": model route "ftp://adapter/v1": scheme "ftp": give an http:// or https:// URL`}},
		{"model route on the sandbox's loopback", "POST", "/v2/sandboxes", map[string]any{"templateID": "base", "metadata": map[string]string{e2b.MetaImage: "rollcage/plain:latest", e2b.MetaModelRoute: "http://localhost:8000/v1"}},
			[]string{"localhost is the sandbox's own loopback"}},
		{"id ..", "GET", "/sandboxes/..", nil, []string{"has an empty, '.' or '..' segment"}},
		{"id .. then a verb", "POST", "/sandboxes/../timeout", map[string]int{"timeout": 1}, []string{"has an empty, '.' or '..' segment"}},
		{"empty segment", "DELETE", "/sandboxes//x", nil, []string{"has an empty, '.' or '..' segment"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := json.Marshal(tc.body)
			req, err := http.NewRequest(tc.method, e.url+tc.path, bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-API-KEY", keyA)
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got created
			derr := json.NewDecoder(resp.Body).Decode(&got)
			if resp.StatusCode != http.StatusBadRequest || derr != nil || got.Code != http.StatusBadRequest {
				t.Fatalf("%d %s (Location %q): %+v (%v); want 400 in E2B's JSON", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Location"), got, derr)
			}
			for _, m := range tc.msg {
				if !strings.Contains(got.Message, m) {
					t.Errorf("message %q does not say %q", got.Message, m)
				}
			}
		})
	}
}

// TestCreateModelRoute: metadata[rollcage/model_route] gives the
// sandbox's episode its routes to the trainer's model adapter, which turn
// the egress proxy on; episode_start records both.
func TestCreateModelRoute(t *testing.T) {
	e := newEnv(t)
	routes := []string{"http://adapter.internal:30000/v1", "https://models.internal:8443"}
	c := e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest", e2b.MetaModelRoute: routes[0] + ", " + routes[1]})
	var cfg struct {
		Network     string   `json:"network"`
		ModelRoutes []string `json:"model_routes"`
	}
	found := false
	err := e.store.Read(context.Background(), c.SandboxID, 0, func(ev trajectory.Event) error {
		if ev.Type != trajectory.TypeEpisodeStart {
			return nil
		}
		var st trajectory.EpisodeStart
		if err := ev.Decode(&st); err != nil {
			return err
		}
		found = true
		return json.Unmarshal(st.Config, &cfg)
	})
	if err != nil || !found {
		t.Fatalf("reading episode_start of %s: found %v, %v", c.SandboxID, found, err)
	}
	if d := cmp.Diff(routes, cfg.ModelRoutes); cfg.Network != "proxy" || d != "" {
		t.Errorf("episode_start config: network %q, routes (-want +got):\n%s", cfg.Network, d)
	}
}

func TestSubmit(t *testing.T) {
	e := newEnv(t)
	plain := e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"})
	var msg created
	if code, _ := e.do("POST", "/sandboxes/"+plain.SandboxID+"/rollcage/submit", keyA, nil, &msg); code != 409 || !strings.Contains(msg.Message, e2b.MetaTask) {
		t.Errorf("submit without a task: %d %+v", code, msg)
	}
	var unknown created
	if code, _ := e.do("POST", "/v2/sandboxes", keyA, map[string]any{"metadata": map[string]string{e2b.MetaTask: "nope"}}, &unknown); code != 400 || !strings.Contains(unknown.Message, "fake-task") {
		t.Errorf("unknown task: %d %+v", code, unknown)
	}
	bound := e.create(keyA, map[string]string{e2b.MetaTask: boundTask.ID})
	var o harness.Outcome
	if code, _ := e.do("POST", "/sandboxes/"+bound.SandboxID+"/rollcage/submit", keyA, map[string]string{"message": "done"}, &o); code != 200 || o.EpisodeID != bound.SandboxID || o.TaskID != boundTask.ID {
		t.Errorf("submit: %d %+v", code, o)
	}
	if code, _ := e.do("DELETE", "/sandboxes/"+bound.SandboxID, keyA, nil, nil); code != 404 {
		t.Errorf("kill after submit: %d (the graded episode has ended)", code)
	}
}

// TestIdleCloseFollowsTimeout: the gateway's idle close does not cut a
// sandbox whose E2B timeout has not passed, however idle it is; the
// sandbox ends at its timeout. In a synctest bubble: the minute passes on
// the bubble's clock, with both reapers ticking every second.
func TestIdleCloseFollowsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newBubbleEnv(t, func(c *server.Config) { c.IdleTimeout = time.Second })
		cr := e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"}) // timeout 60 s
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if code, _ := e.do("GET", "/sandboxes/"+cr.SandboxID, keyA, nil, nil); code != 200 {
			t.Fatalf("an idle sandbox within its timeout: %d, want 200", code)
		}
		c := e.clients(cr)
		if _, out, _, err := run(context.Background(), t, c, bashCfg("echo still")); err != nil || out != "still\n" {
			t.Errorf("after idling: %q %v", out, err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if code, _ := e.do("GET", "/sandboxes/"+cr.SandboxID, keyA, nil, nil); code != 404 {
			t.Errorf("a sandbox past its timeout: %d, want 404", code)
		}
	})
}

// TestKeepalive: a process stream carries a keepalive every
// Config.Keepalive between start and end (the SDKs ping every 50 s;
// rollcage sends more often). In a synctest bubble, with a scripted
// process that writes after a second: exactly three keepalives at 300 ms.
func TestKeepalive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvOn(t, envOptions{inMemory: true,
			api:     func(c *e2b.Config) { c.Keepalive = 300 * time.Millisecond },
			backend: func(b *fake.Backend) { b.Start = fake.Script(fake.Step{After: time.Second, Data: "done\n"}) }})
		c := e.clients(e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"}), connect.WithProtoJSON())
		st, err := c.proc.Start(context.Background(), connect.NewRequest(&process.StartRequest{Process: bashCfg("sleep 1; echo done")}))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var kinds []string
		for st.Receive() {
			switch ev := st.Msg().Event; {
			case ev.GetStart() != nil:
				kinds = append(kinds, "start")
			case ev.GetKeepalive() != nil:
				kinds = append(kinds, "keepalive")
			case ev.GetData() != nil:
				kinds = append(kinds, "data")
			case ev.GetEnd() != nil:
				kinds = append(kinds, "end")
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"start", "keepalive", "keepalive", "keepalive", "data", "end"}, kinds); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
}

// pyWire sends one request the way the Python SDK's Connect client
// (e2b_connect) does: binary proto, its headers, a streamed request in
// one envelope.
func pyWire(t *testing.T, url string, c created, method string, msg proto.Message, stream bool) (*http.Response, []byte) {
	t.Helper()
	data, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	ctype := "application/proto"
	if stream {
		env := make([]byte, 5, 5+len(data))
		binary.BigEndian.PutUint32(env[1:], uint32(len(data)))
		data = append(env, data...)
		ctype = "application/connect+proto"
	}
	req, _ := http.NewRequest("POST", url+method, bytes.NewReader(data))
	req.Header.Set("user-agent", "connect-python")
	req.Header.Set("connect-protocol-version", "1")
	req.Header.Set("content-type", ctype)
	if stream {
		req.Header.Set("connect-content-encoding", "identity")
		req.Header.Set("connect-timeout-ms", "30000")
	} else {
		req.Header.Set("content-encoding", "identity")
	}
	req.Header.Set("E2b-Sandbox-Id", c.SandboxID)
	req.Header.Set("X-Access-Token", c.EnvdAccessToken)
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("root:")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// TestPythonWire: the requests of the Python SDK's own Connect client
// are served, and errors before the handler carry a Connect code name in
// the JSON body, which that client maps to its Code enum.
func TestPythonWire(t *testing.T) {
	e := newEnv(t)
	c := e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"})
	resp, body := pyWire(t, e.url, c, "/process.Process/Start", &process.StartRequest{Process: bashCfg("echo py; exit 4")}, true)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/connect+proto" {
		t.Fatalf("start: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var kinds []string
	var out string
	var code int32
	for len(body) >= 5 {
		flags, n := body[0], binary.BigEndian.Uint32(body[1:5])
		frame := body[5 : 5+n]
		body = body[5+n:]
		if flags&2 != 0 { // end of stream: JSON, as the client expects
			var end map[string]any
			if err := json.Unmarshal(frame, &end); err != nil || end["error"] != nil {
				t.Errorf("end-stream frame %q: %v", frame, err)
			}
			kinds = append(kinds, "end-stream")
			continue
		}
		var r process.StartResponse
		if err := proto.Unmarshal(frame, &r); err != nil {
			t.Fatal(err)
		}
		switch ev := r.Event; {
		case ev.GetStart() != nil:
			kinds = append(kinds, "start")
		case ev.GetData() != nil:
			kinds = append(kinds, "data")
			out += string(ev.GetData().GetStdout())
		case ev.GetEnd() != nil:
			kinds = append(kinds, "end")
			code = ev.GetEnd().ExitCode
		}
	}
	if diff := cmp.Diff([]string{"start", "data", "end", "end-stream"}, kinds); diff != "" || out != "py\n" || code != 4 {
		t.Errorf("stream %v (-want +got %s), output %q, exit %d", kinds, diff, out, code)
	}
	resp, body = pyWire(t, e.url, c, "/process.Process/List", &process.ListRequest{}, false)
	var list process.ListResponse
	if resp.StatusCode != 200 || proto.Unmarshal(body, &list) != nil {
		t.Errorf("list: %d %q", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		name string
		c    created
		code string
	}{
		{"wrong token", created{SandboxID: c.SandboxID, EnvdAccessToken: "rce_nope"}, "unauthenticated"},
		{"gone", created{SandboxID: "inope", EnvdAccessToken: c.EnvdAccessToken}, "unavailable"},
	} {
		_, body := pyWire(t, e.url, tc.c, "/process.Process/List", &process.ListRequest{}, false)
		var errBody struct {
			Code string `json:"code"`
		}
		if json.Unmarshal(body, &errBody) != nil || errBody.Code != tc.code {
			t.Errorf("%s: body %q, want code %q", tc.name, body, tc.code)
		}
	}
}

// TestTimeoutOverWallTime: a sandbox timeout that outlives the episode's
// wall-time limit is an error naming the limit, at create, setTimeout and
// connect, never a silent clamp; one within it is taken.
func TestTimeoutOverWallTime(t *testing.T) {
	e := newEnv(t, func(c *server.Config) {
		r, err := harness.NewRunner(harness.Config{Backend: hostBackend(t.TempDir()), Monitor: harnesstest.Monitor(t, monitor.Config{}),
			Store: c.Store, Limits: harness.Limits{WallTime: 2 * time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		c.Runner = r
	})
	meta := map[string]string{e2b.MetaImage: "rollcage/plain:latest"}
	var c created
	code, _ := e.do("POST", "/v2/sandboxes", keyA, map[string]any{"templateID": "base", "metadata": meta, "timeout": 3600}, &c)
	if code != http.StatusBadRequest || !strings.Contains(c.Message, "timeout 3600 s outlives the episode's wall-time limit (rollcage serve --wall-time)") {
		t.Errorf("create with timeout 3600 under a 2m wall time: %d %q, want 400 naming the limit", code, c.Message)
	}
	var list []created
	if e.do("GET", "/sandboxes", keyA, nil, &list); len(list) != 0 {
		t.Errorf("the refused sandbox was left running: %+v", list)
	}
	ok := e.create(keyA, meta) // timeout 60: within
	for _, tc := range []struct {
		path    string
		timeout int
		want    int
	}{
		{"/sandboxes/" + ok.SandboxID + "/timeout", 90, http.StatusNoContent},
		{"/sandboxes/" + ok.SandboxID + "/timeout", 600, http.StatusBadRequest},
		{"/sandboxes/" + ok.SandboxID + "/connect", 600, http.StatusBadRequest},
		{"/sandboxes/" + ok.SandboxID + "/connect", 60, http.StatusOK},
	} {
		var msg created
		code, _ := e.do("POST", tc.path, keyA, map[string]int{"timeout": tc.timeout}, &msg)
		if code != tc.want || (tc.want == http.StatusBadRequest && !strings.Contains(msg.Message, "give at most 1")) {
			t.Errorf("%s %d: %d %q, want %d", tc.path, tc.timeout, code, msg.Message, tc.want)
		}
	}
}

// TestCreateByInstanceID: a sandbox is bound to a loaded task by its
// benchmark instance id, given as the template or as metadata
// rollcage/task, and is then graded by submit as that task.
func TestCreateByInstanceID(t *testing.T) {
	inst := boundTask
	inst.InstanceID = "demo/fake-instance"
	e := newEnv(t, func(c *server.Config) { c.Tasks = []task.Task{inst} })
	for _, req := range []map[string]any{
		{"templateID": inst.InstanceID},
		{"templateID": "base", "metadata": map[string]string{e2b.MetaTask: inst.InstanceID}},
	} {
		var c created
		if code, _ := e.do("POST", "/v2/sandboxes", keyA, req, &c); code != http.StatusCreated {
			t.Fatalf("create %v: %d %+v", req, code, c)
		}
		var o harness.Outcome
		if code, _ := e.do("POST", "/sandboxes/"+c.SandboxID+"/rollcage/submit", keyA, nil, &o); code != 200 || o.TaskID != inst.ID {
			t.Errorf("submit of the sandbox created with %v: %d, task %q; want 200 and %q", req, code, o.TaskID, inst.ID)
		}
	}
}
