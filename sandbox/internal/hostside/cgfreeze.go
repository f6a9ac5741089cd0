package hostside

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cgroupRoot is where the cgroup file systems are mounted.
var cgroupRoot = "/sys/fs/cgroup"

// Bounds of FreezeCgroup's wait for a freeze to settle.
const (
	freezeSettle = 200 * time.Millisecond // per try, before thawing and trying again
	freezePoll   = 500 * time.Microsecond
)

// FreezeCgroup freezes the cgroup that process pid is in, through the
// cgroup file system (the v1 freezer's freezer.state, or v2's
// cgroup.freeze), and returns when every task in it is frozen, with the
// function that thaws it. It is what the engine's pause does (runc writes
// the same files), without the engine's round trips: a runc process for
// the pause and another for the resume, each tens of milliseconds under
// load, during which the container is frozen for nothing. A freeze that
// does not settle (a task forking at that moment) is thawed and tried
// again, as runc does, up to freezeAttempts times. The engine does not
// know the container is frozen, so the caller must not pause or resume it
// through the engine meanwhile; thaw must be called whatever happens.
func FreezeCgroup(ctx context.Context, pid int) (thaw func() error, err error) {
	state, frozen, thawed, err := freezerFiles(pid)
	if err != nil {
		return nil, err
	}
	thaw = func() error {
		if err := os.WriteFile(state, []byte(thawed), 0); err != nil {
			return fmt.Errorf("thaw the cgroup: %w", err)
		}
		return nil
	}
	for range freezeAttempts {
		if err := os.WriteFile(state, []byte(frozen), 0); err != nil {
			return nil, fmt.Errorf("freeze the cgroup: %w", err)
		}
		ok, err := waitFrozen(ctx, state)
		if ok {
			return thaw, nil
		}
		terr := thaw()
		if err != nil || terr != nil {
			return nil, errors.Join(err, terr)
		}
	}
	return nil, fmt.Errorf("freeze the cgroup: it did not settle in %d tries of %v", freezeAttempts, freezeSettle)
}

// freezerFiles finds the file that freezes pid's cgroup and what to write
// to it to freeze and to thaw.
func freezerFiles(pid int) (state, frozen, thawed string, err error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", "", "", fmt.Errorf("the process's cgroup: %w", err)
	}
	var v2 string
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if slices.Contains(strings.Split(f[1], ","), "freezer") {
			return filepath.Join(cgroupRoot, "freezer", f[2], "freezer.state"), "FROZEN", "THAWED", nil
		}
		if f[0] == "0" && f[1] == "" {
			v2 = f[2]
		}
	}
	if v2 != "" {
		for _, root := range []string{cgroupRoot, filepath.Join(cgroupRoot, "unified")} {
			p := filepath.Join(root, v2, "cgroup.freeze")
			if _, err := os.Stat(p); err == nil {
				return p, "1", "0", nil
			}
		}
	}
	return "", "", "", fmt.Errorf("no freezer for process %d's cgroup (%s)", pid, strings.TrimSpace(string(raw)))
}

// waitFrozen polls a freezer until it says frozen, for up to freezeSettle.
func waitFrozen(ctx context.Context, state string) (bool, error) {
	events := ""
	if filepath.Base(state) == "cgroup.freeze" {
		events = filepath.Join(filepath.Dir(state), "cgroup.events")
	}
	deadline := time.Now().Add(freezeSettle)
	for {
		if events != "" {
			raw, err := os.ReadFile(events)
			if err != nil {
				return false, fmt.Errorf("freeze the cgroup: %w", err)
			}
			if strings.Contains("\n"+string(raw), "\nfrozen 1") {
				return true, nil
			}
		} else {
			raw, err := os.ReadFile(state)
			if err != nil {
				return false, fmt.Errorf("freeze the cgroup: %w", err)
			}
			if strings.TrimSpace(string(raw)) == "FROZEN" {
				return true, nil
			}
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(freezePoll):
		}
	}
}
