package trajectory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := OpenStore(context.Background(), Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func readAll(t testing.TB, s *Store, id string, from int64) []Event {
	t.Helper()
	var evs []Event
	if err := s.Read(context.Background(), id, from, func(ev Event) error {
		evs = append(evs, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

func readFinished(t testing.TB, s *Store, from int64) []Event {
	t.Helper()
	var evs []Event
	if err := s.ReadFinished(context.Background(), from, func(ev Event) error {
		evs = append(evs, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

func mustEvent(t testing.TB, typ string, seg, step int, payload any) Event {
	t.Helper()
	ev, err := NewEvent("", seg, step, typ, payload)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	l, err := s.Log("ep-1")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	in := []Event{
		mustEvent(t, TypeEpisodeStart, 0, 0, EpisodeStart{TaskID: "t1"}),
		mustEvent(t, TypeToolCall, 0, 1, ToolCall{Call: json.RawMessage(`{"tool":"bash"}`)}),
		{Type: TypeToolOutput, Step: 1, Time: at, Data: json.RawMessage(`{"output":"ok","exit_code":0}`)},
	}
	for i, ev := range in {
		off, err := l.Append(ev)
		if err != nil {
			t.Fatal(err)
		}
		if off != int64(i) {
			t.Errorf("Append #%d: offset %d, want %d", i, off, i)
		}
	}
	got := readAll(t, s, "ep-1", 0)
	if len(got) != 3 || got[0].Time.IsZero() || !got[2].Time.Equal(at) {
		t.Fatalf("read back %+v", got)
	}
	for i, ev := range got {
		if ev.Offset != int64(i) || ev.EpisodeID != "ep-1" || ev.Type != in[i].Type || string(ev.Data) != string(in[i].Data) {
			t.Errorf("event %d = %+v, want type %s data %s", i, ev, in[i].Type, in[i].Data)
		}
	}
	if tail := readAll(t, s, "ep-1", 2); len(tail) != 1 || tail[0].Offset != 2 {
		t.Errorf("read from 2: %+v", tail)
	}
	if l2, _ := s.Log("ep-1"); l2 != l {
		t.Error("second Log of an open episode is a different *Log")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(Event{Type: TypeToolCall}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v, want ErrClosed", err)
	}

	// Reopen: offsets continue.
	l, err = s.Log("ep-1")
	if err != nil {
		t.Fatal(err)
	}
	if off, err := l.Append(mustEvent(t, TypeEpisodeEnd, 0, 2, EpisodeEnd{Resolved: true, Reward: 1})); err != nil || off != 3 {
		t.Fatalf("append after reopen: %d, %v; want offset 3", off, err)
	}
	if _, err := l.Append(Event{Type: TypeToolCall}); !errors.Is(err, ErrFinished) {
		t.Errorf("Append after episode_end: %v, want ErrFinished", err)
	}
	eps, err := s.Episodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []EpisodeInfo{{ID: "ep-1", Events: 4, Finished: true}}
	if d := cmp.Diff(want, eps, cmp.Comparer(func(a, b EpisodeInfo) bool {
		return a.ID == b.ID && a.Events == b.Events && a.Finished == b.Finished
	})); d != "" {
		t.Errorf("Episodes (-want +got):\n%s", d)
	}
}

func TestAppendRejects(t *testing.T) {
	s := openStore(t, t.TempDir())
	l, err := s.Log("ep")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ev   Event
		want error
	}{
		{"no type", Event{}, ErrBadEvent},
		{"other episode", Event{EpisodeID: "other", Type: TypeToolCall}, ErrBadEvent},
		{"bad json payload", Event{Type: TypeToolCall, Data: json.RawMessage(`{`)}, ErrBadEvent},
	}
	for _, tc := range tests {
		if _, err := l.Append(tc.ev); !errors.Is(err, tc.want) {
			t.Errorf("%s: Append = %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, id := range []string{"", "../x", "_finished", "a/b", ".hidden"} {
		if _, err := s.Log(id); err == nil {
			t.Errorf("Log(%q) accepted a bad id", id)
		}
	}
	if off, err := l.Append(Event{Type: TypeToolCall}); err != nil || off != 0 {
		t.Errorf("good append after rejects: %d, %v; want offset 0", off, err)
	}
}

func TestTornTail(t *testing.T) {
	tests := []struct {
		name string
		tail string
	}{
		{"half a line", `{"offset":2,"episode_id":"ep","type":"tool_c`},
		{"garbage line with newline", "\x00\x00\x00\n"},
		{"wrong offset", `{"offset":7,"episode_id":"ep","type":"tool_call"}` + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			l, _ := s.Log("ep")
			for range 2 {
				if _, err := l.Append(Event{Type: TypeToolCall}); err != nil {
					t.Fatal(err)
				}
			}
			l.Close()
			s.Close()
			f, err := os.OpenFile(filepath.Join(dir, "ep.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(tc.tail)
			f.Close()

			s = openStore(t, dir)
			if got := readAll(t, s, "ep", 0); len(got) != 2 {
				t.Errorf("read before reopen: %d events, want 2", len(got))
			}
			l, err = s.Log("ep")
			if err != nil {
				t.Fatal(err)
			}
			if off, err := l.Append(Event{Type: TypeToolOutput}); err != nil || off != 2 {
				t.Fatalf("append after torn tail: %d, %v; want offset 2", off, err)
			}
			got := readAll(t, s, "ep", 0)
			var types []string
			for _, ev := range got {
				types = append(types, ev.Type)
			}
			if d := cmp.Diff([]string{TypeToolCall, TypeToolCall, TypeToolOutput}, types); d != "" {
				t.Errorf("events after recovery (-want +got):\n%s", d)
			}
		})
	}
}

func TestConcurrentAppend(t *testing.T) {
	s := openStore(t, t.TempDir())
	l, _ := s.Log("ep")
	const writers, each = 8, 200
	var wg sync.WaitGroup
	offs := make(chan int64, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				off, err := l.Append(Event{Type: TypeToolCall, Step: w*each + i})
				if err != nil {
					t.Error(err)
					return
				}
				offs <- off
			}
		})
	}
	wg.Wait()
	close(offs)
	seen := map[int64]bool{}
	for o := range offs {
		seen[o] = true
	}
	got := readAll(t, s, "ep", 0)
	if len(got) != writers*each || len(seen) != writers*each {
		t.Fatalf("%d events read, %d distinct offsets; want %d", len(got), len(seen), writers*each)
	}
	steps := map[int]bool{}
	for i, ev := range got {
		if ev.Offset != int64(i) {
			t.Fatalf("event %d has offset %d", i, ev.Offset)
		}
		steps[ev.Step] = true
	}
	if len(steps) != writers*each {
		t.Errorf("%d distinct steps, want %d", len(steps), writers*each)
	}
}

func TestFinishedFeed(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	l, _ := s.Log("ep")
	for _, ev := range []Event{
		mustEvent(t, TypeEpisodeStart, 0, 0, EpisodeStart{TaskID: "t"}),
		{Type: TypeToolCall, Step: 1},
		mustEvent(t, TypeCompaction, 1, 1, Compaction{From: 0, To: 1, Summary: "s"}),
		{Type: TypeToolCall, Segment: 1, Step: 2},
		mustEvent(t, TypeEpisodeEnd, 1, 2, EpisodeEnd{Reward: 0.5}),
	} {
		if _, err := l.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	type item struct {
		Offset  int64
		Episode string
		Type    string
		Seg     SegmentEnd
		Reward  float64
	}
	summarize := func(evs []Event) []item {
		var out []item
		for _, ev := range evs {
			it := item{Offset: ev.Offset, Episode: ev.EpisodeID, Type: ev.Type}
			if ev.Type == TypeSegmentEnd {
				ev.Decode(&it.Seg)
			} else {
				var end EpisodeEnd
				ev.Decode(&end)
				it.Reward = end.Reward
			}
			out = append(out, it)
		}
		return out
	}
	want := []item{
		{0, "ep", TypeSegmentEnd, SegmentEnd{Segment: 0, First: 0, Last: 1, By: TypeCompaction}, 0},
		{1, "ep", TypeSegmentEnd, SegmentEnd{Segment: 1, First: 2, Last: 4, By: TypeEpisodeEnd}, 0},
		{2, "ep", TypeEpisodeEnd, SegmentEnd{}, 0.5},
	}
	if d := cmp.Diff(want, summarize(readFinished(t, s, 0))); d != "" {
		t.Errorf("finished feed (-want +got):\n%s", d)
	}

	// A crash after the episode ended but before its feed items were
	// written: reopening the store adds them, once.
	s.Close()
	if err := os.Truncate(filepath.Join(dir, "_finished.jsonl"), 0); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if d := cmp.Diff(want, summarize(readFinished(t, s, 0))); d != "" {
		t.Errorf("finished feed after recovery (-want +got):\n%s", d)
	}
	s.Close()
	s = openStore(t, dir)
	if n := len(readFinished(t, s, 0)); n != 3 {
		t.Errorf("finished feed after a second reopen: %d items, want 3", n)
	}
}

// TestCrashKill9 re-executes the test binary as a child that appends
// events and prints each offset Append returned; the parent kills it with
// SIGKILL mid-stream, adds a torn line as a crash mid-write would, and
// checks that every reported event survived and the log continues.
func TestCrashKill9(t *testing.T) {
	if dir := os.Getenv("TRAJECTORY_CRASH_CHILD"); dir != "" {
		crashChild(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill9$")
	cmd.Env = append(os.Environ(), "TRAJECTORY_CRASH_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	reported := int64(-1)
	for sc.Scan() {
		off, err := strconv.ParseInt(strings.TrimPrefix(sc.Text(), "appended "), 10, 64)
		if err != nil {
			continue
		}
		if off != reported+1 {
			t.Fatalf("child reported offset %d after %d", off, reported)
		}
		reported = off
		if reported == 500 {
			cmd.Process.Kill() // SIGKILL: no deferred Close, no final fsync
			break
		}
	}
	cmd.Wait()
	if reported < 500 {
		t.Fatalf("child reported only up to offset %d", reported)
	}
	p := filepath.Join(dir, "ep.jsonl")
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"offset":999999,"episode_id":"ep","ty`) // torn write
	f.Close()

	s := openStore(t, dir)
	got := readAll(t, s, "ep", 0)
	if int64(len(got)) < reported+1 {
		t.Fatalf("after kill -9: %d events on disk, child reported %d appended", len(got), reported+1)
	}
	for i, ev := range got {
		var p struct{ N int }
		if err := ev.Decode(&p); err != nil || ev.Offset != int64(i) || p.N != i {
			t.Fatalf("event %d: offset %d payload %+v (%v)", i, ev.Offset, p, err)
		}
	}
	l, err := s.Log("ep")
	if err != nil {
		t.Fatal(err)
	}
	if off, err := l.Append(Event{Type: TypeToolCall}); err != nil || off != int64(len(got)) {
		t.Errorf("append after crash: offset %d, %v; want %d", off, err, len(got))
	}
}

func crashChild(dir string) {
	s, err := OpenStore(context.Background(), Config{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	l, err := s.Log("ep")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	pad := strings.Repeat("x", 900)
	for i := 0; ; i++ {
		ev, _ := NewEvent("", 0, i, TypeToolOutput, map[string]any{"N": i, "pad": pad})
		off, err := l.Append(ev)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("appended %d\n", off)
	}
}

func TestSyncAlways(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(context.Background(), Config{Dir: dir, SyncInterval: SyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, _ := s.Log("ep")
	if l.every != 0 {
		t.Fatalf("SyncAlways: interval %v, want 0 (every event)", l.every)
	}
	if _, err := l.Append(Event{Type: TypeToolCall}); err != nil {
		t.Fatal(err)
	}
	if (Config{}).syncInterval() != DefaultSyncInterval {
		t.Errorf("zero SyncInterval is %v, want %v", (Config{}).syncInterval(), DefaultSyncInterval)
	}
	if err := (Config{}).Validate(); err == nil {
		t.Error("Config without Dir validated")
	}
}

func BenchmarkAppend(b *testing.B) {
	s := openStore(b, b.TempDir())
	l, err := s.Log("bench")
	if err != nil {
		b.Fatal(err)
	}
	// A realistic ~1 KB decision event.
	data, _ := json.Marshal(Decision{
		Call:       json.RawMessage(`{"episode_id":"bench","tool":"bash","args":{"command":"cd /workspace && python -m pytest tests/test_wrap.py -x -q 2>&1 | tail -n 40"}}`),
		Normalized: json.RawMessage(`{"tool":"bash","raw":"cd /workspace && python -m pytest tests/test_wrap.py -x -q 2>&1 | tail -n 40","cwd":"/workspace","commands":[{"name":"cd","argv":["cd","/workspace"]},{"name":"python","argv":["python","-m","pytest","tests/test_wrap.py","-x","-q"]},{"name":"tail","argv":["tail","-n","40"],"via":"pipe"}],"reads":["/workspace/tests/test_wrap.py"]}`),
		Flags:      json.RawMessage(`[{"rule":"visible_tests_read","category":"environment_probing","severity":"suspicious","reason":"reads a visible test file","evidence":"tests/test_wrap.py"}]`),
		Verdict:    json.RawMessage(`{"hack":false,"category":"","confidence":0.93,"rationale":"Running the visible tests is what an honest solver does before and after a change; nothing protected is read."}`),
		Action:     ActionAllow,
		LatencyMS:  412,
	})
	ev := Event{Type: TypeDecision, Step: 7, Data: data}
	line, _ := json.Marshal(ev)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		if _, err := l.Append(ev); err != nil {
			b.Fatal(err)
		}
	}
	// Wall-clock events/s is the target; events per CPU-second says what
	// one core sustains when the machine is shared and wall time is noisy.
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/(cpuTime(b)-cpu0).Seconds(), "events/cpu-s")
}

func TestEncodeEventMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 891011, time.FixedZone("x", 3600))
	tests := []Event{
		{Type: TypeToolCall},
		{Offset: 12, EpisodeID: "ep-1", Segment: 2, Step: 9, Type: TypeDecision, Time: at, Data: json.RawMessage(`{"a":"<b>&\u00e9"}`)},
		{EpisodeID: "é\"\n", Type: "odd <type>", Data: json.RawMessage("{\n  \"a\": [1,\n 2]\n}")},
		{Type: TypeGrade, Data: json.RawMessage(`"just a string"`)},
	}
	for _, ev := range tests {
		var buf bytes.Buffer
		if err := encodeEvent(&buf, &ev); err != nil {
			t.Fatalf("encodeEvent(%+v): %v", ev, err)
		}
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var got, wantV any
		json.Unmarshal(buf.Bytes(), &got)
		json.Unmarshal(want, &wantV)
		if d := cmp.Diff(wantV, got); d != "" || bytes.Count(buf.Bytes(), []byte("\n")) != 1 {
			t.Errorf("encodeEvent(%+v) = %s\nwant same value as %s (-want +got):\n%s", ev, buf.Bytes(), want, d)
		}
	}
	var buf bytes.Buffer
	if err := encodeEvent(&buf, &Event{Type: "x", Data: json.RawMessage(`{"a":`)}); err == nil {
		t.Error("encodeEvent accepted invalid Data")
	}
}

func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestDiscardEmpty: only a log with no event, and not open, is removed.
func TestDiscardEmpty(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	open, _ := s.Log("ep-open")
	defer open.Close()
	closed, _ := s.Log("ep-closed")
	closed.Close()
	full, _ := s.Log("ep-full")
	if _, err := full.Append(Event{Type: TypeToolCall}); err != nil {
		t.Fatal(err)
	}
	full.Close()
	tests := []struct {
		id      string
		removed bool
		err     error
	}{
		{"ep-open", false, nil},
		{"ep-full", false, nil},
		{"ep-closed", true, nil},
		{"ep-none", false, ErrNotFound},
	}
	for _, tc := range tests {
		removed, err := s.DiscardEmpty(tc.id)
		if removed != tc.removed || !errors.Is(err, tc.err) {
			t.Errorf("DiscardEmpty(%s) = %v, %v; want %v, %v", tc.id, removed, err, tc.removed, tc.err)
		}
		_, serr := os.Stat(filepath.Join(dir, tc.id+".jsonl"))
		if exists := serr == nil; exists != (tc.err == nil && !tc.removed) {
			t.Errorf("%s: file exists %v after DiscardEmpty", tc.id, exists)
		}
	}
}
