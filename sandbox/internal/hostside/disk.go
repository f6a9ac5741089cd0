package hostside

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/rollcage/rollcage/sandbox"
)

// errDiskLimit is the cancel cause of a call the watchdog stopped.
var errDiskLimit = errors.New("disk limit reached")

// DiskWatch enforces a disk limit where the storage driver cannot: it
// measures the container's writable layer (overlay2's UpperDir, which
// holds /tmp and every file the sandbox wrote) from the host, and at the
// limit stops the calls in flight that made it grow, refuses writes, and
// says so in the output, until usage drops below the limit again.
type DiskWatch struct {
	dir   string
	limit int64
	log   *slog.Logger
	// kill stops the sandbox user's processes (a background writer with
	// no call in flight).
	kill func(ctx context.Context)

	mu       sync.Mutex
	used     int64                  // guarded by mu; last measurement
	over     bool                   // guarded by mu
	inflight map[*diskCall]struct{} // guarded by mu
	cost     time.Duration          // guarded by mu; last walk's duration
	stop     chan struct{}
	done     chan struct{}
}

type diskCall struct {
	startUsed int64
	cancel    context.CancelCauseFunc
}

// NewDiskWatch starts watching dir (a writable layer on the host) against
// limit; kill stops the sandbox user's processes when usage grows past the
// limit with no call in flight.
func NewDiskWatch(dir string, limit int64, log *slog.Logger, kill func(context.Context)) *DiskWatch {
	w := &DiskWatch{dir: dir, limit: limit, log: log, kill: kill, inflight: map[*diskCall]struct{}{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

// Close stops the watchdog. Idempotent.
func (w *DiskWatch) Close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// Usage is the disk space the files under dir take (allocated blocks, each
// hard-linked inode once). Files that vanish mid-walk are skipped.
func Usage(dir string) (int64, error) {
	var total int64
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return nil // gone since the directory was read
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Nlink > 1 && !fi.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
}

// measure walks the layer once and acts on the result. Only the periodic
// check (fromLoop) may stop background processes: right after a call the
// growth is that call's own.
func (w *DiskWatch) measure(fromLoop bool) int64 {
	t0 := time.Now()
	u, err := Usage(w.dir)
	cost := time.Since(t0)
	if err != nil {
		w.log.Warn("disk watchdog: measuring the writable layer failed", "dir", w.dir, "err", err)
	}
	w.mu.Lock()
	grew := u > w.used
	w.used, w.cost = u, cost
	w.over = u > w.limit
	var stopped int
	if w.over {
		for c := range w.inflight {
			if u > c.startUsed {
				c.cancel(errDiskLimit)
				stopped++
			}
		}
	}
	idle := len(w.inflight) == 0
	over := w.over
	w.mu.Unlock()
	if fromLoop && over && grew && idle && w.kill != nil {
		// Growing over the limit with no call in flight: something the
		// policy left running in the background is writing.
		w.log.Info("disk watchdog: usage grows past the limit between calls; stopping the sandbox user's processes", "used", u, "limit", w.limit)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		w.kill(ctx)
		cancel()
	}
	return u
}

func (w *DiskWatch) loop() {
	defer close(w.done)
	for {
		w.measure(true)
		w.mu.Lock()
		// A check costs a walk of the layer: keep it under ~5% of one CPU.
		interval := min(max(20*w.cost, 500*time.Millisecond), 10*time.Second)
		w.mu.Unlock()
		select {
		case <-w.stop:
			return
		case <-time.After(interval):
		}
	}
}

// message is what the policy is told at the limit.
func (w *DiskWatch) message(used int64) string {
	return fmt.Sprintf("rollcage: disk limit reached: the sandbox uses %s of its %s limit; delete files (rm) to go on",
		mib(used), mib(w.limit))
}

func mib(n int64) string {
	if n >= 10<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// Exec runs one command under the watchdog.
func (w *DiskWatch) Exec(ctx context.Context, req sandbox.ExecRequest, run func(context.Context, sandbox.ExecRequest) (sandbox.ExecResult, error)) (sandbox.ExecResult, error) {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w.mu.Lock()
	c := &diskCall{startUsed: w.used, cancel: cancel}
	w.inflight[c] = struct{}{}
	over := w.over
	w.mu.Unlock()
	res, err := run(cctx, req)
	w.mu.Lock()
	delete(w.inflight, c)
	w.mu.Unlock()
	if errors.Is(context.Cause(cctx), errDiskLimit) && ctx.Err() == nil {
		used := w.measure(false)
		return sandbox.ExecResult{Output: w.message(used) + "\n", ExitCode: 137, Stopped: sandbox.StopDisk}, nil
	}
	if err != nil {
		return res, err
	}
	if over {
		// Measure again now, so the call that deleted files sees at once
		// that it is below the limit again, and one that did not is told.
		if used := w.measure(false); used > w.limit {
			res.Output += "\n" + w.message(used) + "\n"
			res.Stopped = cmpStop(res.Stopped, sandbox.StopDisk)
		}
	}
	return res, nil
}

func cmpStop(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// RefuseWrite is the PathError a write gets when it would pass the limit.
func (w *DiskWatch) RefuseWrite(path string, n int) error {
	w.mu.Lock()
	used, over := w.used, w.over
	w.mu.Unlock()
	if !over && used+int64(n) <= w.limit {
		return nil
	}
	return &sandbox.PathError{Op: "write", Path: path, Kind: sandbox.KindNoSpace,
		Reason: "No space left on device (" + w.message(used+int64(n)) + ")"}
}
