package trajectory

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rollcage/rollcage/trajectory/trajectorytest"
)

// TestOpenStoreLocked: a second owner of a directory is refused with one
// line naming the first (pid, command, start), whether the first is
// another Store of this process or another process; the directory is
// free again once the first closes or dies.
func TestOpenStoreLocked(t *testing.T) {
	if dir := os.Getenv("TRAJECTORY_LOCK_CHILD"); dir != "" {
		lockChild(dir)
		return
	}
	tests := []struct {
		name string
		// hold takes the directory and returns the holder's pid and how
		// to let go of it.
		hold func(t *testing.T, dir string) (pid int, release func())
	}{
		{"same process", func(t *testing.T, dir string) (int, func()) {
			s, err := OpenStore(context.Background(), Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			return os.Getpid(), func() { s.Close() }
		}},
		{"another process", func(t *testing.T, dir string) (int, func()) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestOpenStoreLocked$")
			cmd.Env = append(os.Environ(), "TRAJECTORY_LOCK_CHILD="+dir)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			// The child holds the lock until its stdin closes.
			if _, err := cmd.StdinPipe(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			if line, err := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
				t.Fatalf("child: %q, %v", line, err)
			}
			// SIGKILL: no Close; the kernel drops the lock with the process.
			return cmd.Process.Pid, func() { cmd.Process.Kill(); cmd.Wait() }
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pid, release := tc.hold(t, dir)
			s, err := OpenStore(context.Background(), Config{Dir: dir})
			if err == nil {
				s.Close()
				t.Fatal("second OpenStore of a held directory succeeded")
			}
			var le *LockedError
			if !errors.Is(err, ErrLocked) || !errors.As(err, &le) {
				t.Fatalf("second OpenStore: %v; want a *LockedError wrapping ErrLocked", err)
			}
			msg := err.Error()
			for _, want := range []string{dir, fmt.Sprintf("pid %d ", pid), "(trajectory.test)", "started 20", "give another directory"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			release()
			s, err = OpenStore(context.Background(), Config{Dir: dir})
			if err != nil {
				t.Fatalf("OpenStore after the holder let go: %v", err)
			}
			s.Close()
		})
	}
}

func lockChild(dir string) {
	if _, err := OpenStore(context.Background(), Config{Dir: dir}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin) // hold it until the parent lets go
	os.Exit(0)
}

// TestOpenStoreCorruptLog: a finished log with a corrupt line, which a
// crash kept off the finished feed, does not keep the store shut: the
// store opens, the other episodes reach the feed, and a warning names
// the file.
func TestOpenStoreCorruptLog(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	for _, id := range []string{"ep-a", "ep-b"} {
		l, _ := s.Log(id)
		for _, ev := range []Event{
			mustEvent(t, TypeEpisodeStart, 0, 0, EpisodeStart{TaskID: "t"}),
			{Type: TypeToolCall, Step: 1},
			mustEvent(t, TypeEpisodeEnd, 0, 1, EpisodeEnd{Reward: 1}),
		} {
			if _, err := l.Append(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Close()
	// The crash: the feed lost both episodes, and ep-b's middle line is
	// garbage.
	if err := os.Truncate(filepath.Join(dir, finishedName+".jsonl"), 0); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "ep-b.jsonl")
	trajectorytest.CorruptLine(t, bad, 1)

	var logs bytes.Buffer
	s, err := OpenStore(context.Background(), Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("OpenStore with one corrupt log: %v", err)
	}
	defer s.Close()
	var ended []string
	for _, ev := range readFinished(t, s, 0) {
		if ev.Type == TypeEpisodeEnd {
			ended = append(ended, ev.EpisodeID)
		}
	}
	if strings.Join(ended, ",") != "ep-a" {
		t.Errorf("finished feed ends %v; want ep-a only", ended)
	}
	if !strings.Contains(logs.String(), "file="+bad) || !strings.Contains(logs.String(), "corrupt") {
		t.Errorf("logs do not name %s as corrupt:\n%s", bad, logs.String())
	}
}

// TestOpenStoreFIFO: a FIFO named like a log neither hangs OpenStore (a
// FIFO with no writer blocks an open) nor shows as an episode.
func TestOpenStoreFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "ep-fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	type opened struct {
		s   *Store
		err error
	}
	done := make(chan opened, 1)
	var logs bytes.Buffer
	go func() {
		s, err := OpenStore(context.Background(), Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		done <- opened{s, err}
	}()
	var o opened
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("OpenStore hung on a FIFO")
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	defer o.s.Close()
	eps, err := o.s.Episodes(context.Background())
	if err != nil || len(eps) != 0 {
		t.Errorf("Episodes = %+v, %v; want none", eps, err)
	}
	if !strings.Contains(logs.String(), "file="+fifo) {
		t.Errorf("no warning names %s:\n%s", fifo, logs.String())
	}
}
