package trajectory

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLocked: another process owns the store's directory (see LockedError).
var ErrLocked = errors.New("trajectory directory in use")

// lockName is the owner's lock file in the store's directory. It has no
// .jsonl suffix, so it is never taken for an episode's log.
const lockName = ".rollcage.lock"

// Owner says who holds a store's directory: written into its lock file
// by the holder, read back by whoever is refused.
type Owner struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host,omitempty"`
	Command string    `json:"command"`
	Started time.Time `json:"started"`
}

func (o Owner) String() string {
	host := ""
	if o.Host != "" {
		host = " on " + o.Host
	}
	return fmt.Sprintf("pid %d%s (%s), started %s", o.PID, host, o.Command, o.Started.UTC().Format(time.RFC3339))
}

// LockedError is OpenStore's refusal of a directory another process (or
// another Store in this one) holds. It wraps ErrLocked.
type LockedError struct {
	Dir   string
	Owner *Owner // nil when the lock file does not say (yet)
}

func (e *LockedError) Error() string {
	who := "another process (its lock file names no holder yet)"
	if e.Owner != nil {
		who = e.Owner.String()
	}
	return fmt.Sprintf("trajectory: %s is in use by %s: stop it, or give another directory", e.Dir, who)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// started is this process's start, as near as Go knows it.
var started = time.Now()

// lockDir takes dir's lock for the life of the returned file (closing it
// releases the lock; so does the process's death). The lock is an
// advisory flock, so only rollcage's own writers honour it; readers
// (Export, a second process's Read) take none.
func lockDir(dir string) (*os.File, error) {
	p := filepath.Join(dir, lockName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("trajectory: lock %s: %w", dir, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return nil, &LockedError{Dir: dir, Owner: readOwner(p)}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trajectory: lock %s: %w (the filesystem must support flock)", dir, err)
	}
	host, _ := os.Hostname()
	b, err := json.Marshal(Owner{PID: os.Getpid(), Host: host, Command: command(), Started: started})
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteAt(append(b, '\n'), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trajectory: lock %s: write the owner: %w", dir, err)
	}
	return f, nil
}

// command names this process by its program and subcommand only: the
// rest of its command line may hold secrets (an --admin-token).
func command() string {
	c := filepath.Base(os.Args[0])
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		c += " " + os.Args[1]
	}
	return c
}

// readOwner reads the holder a lock file names; nil when it names none
// (the holder has not written it yet) or cannot be read.
func readOwner(path string) *Owner {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var o Owner
	if json.Unmarshal(b, &o) != nil || o.PID == 0 {
		return nil
	}
	return &o
}
