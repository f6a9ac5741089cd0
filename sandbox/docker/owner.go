package docker

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// owner identifies a host process for the reaper: a pid alone could be
// reused after a crash, so the kernel's start time of the process (clock
// ticks since boot, field 22 of /proc/<pid>/stat) and the boot id go with it.
type owner struct {
	PID   int
	Start uint64
	Boot  string
	// PidNS is the owner's pid namespace (/proc/self/ns/pid): a pid is only
	// meaningful there, so a rollcage in a container (the compose gateway)
	// never judges the host's processes, nor the host its.
	PidNS string
}

// selfOwner is the identity of this process.
func selfOwner() (owner, error) {
	pid := os.Getpid()
	start, err := procStart(pid)
	if err != nil {
		return owner{}, fmt.Errorf("docker: own process start time: %w", err)
	}
	return owner{PID: pid, Start: start, Boot: bootID(), PidNS: pidNS()}, nil
}

// pidNS names this process's pid namespace, e.g. "pid:[4026531836]".
func pidNS() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
}

// alive reports whether the process o names still runs: same pid, same
// start time.
func (o owner) alive() bool {
	if o.PID <= 0 {
		return false
	}
	start, err := procStart(o.PID)
	return err == nil && start == o.Start
}

// procStart reads the start time of pid from /proc/<pid>/stat.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatStart(b)
}

// parseStatStart extracts field 22 (starttime) of a /proc/<pid>/stat line.
// The command name (field 2) is in parentheses and may itself contain
// spaces and parentheses, so fields are counted from the last ')'.
func parseStatStart(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc stat: no ')' in %q", b)
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state); starttime is field 22.
	const idx = 22 - 3
	if len(fields) <= idx {
		return 0, fmt.Errorf("parse /proc stat: %d fields after comm, want > %d", len(fields), idx)
	}
	return strconv.ParseUint(fields[idx], 10, 64)
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Labels every rollcage container carries.
const (
	LabelManaged    = "rollcage.managed"
	LabelEpisode    = "rollcage.episode"
	LabelOwnerPID   = "rollcage.owner.pid"
	LabelOwnerStart = "rollcage.owner.start"
	LabelOwnerBoot  = "rollcage.owner.boot"
	LabelOwnerPidNS = "rollcage.owner.pidns"
	LabelPool       = "rollcage.pool"
	// LabelRunDir names the host directory of the container, so the reaper
	// removes exactly the one it belongs to.
	LabelRunDir = "rollcage.rundir"
)

func (o owner) labels() map[string]string {
	return map[string]string{
		LabelManaged:    "1",
		LabelOwnerPID:   strconv.Itoa(o.PID),
		LabelOwnerStart: strconv.FormatUint(o.Start, 10),
		LabelOwnerBoot:  o.Boot,
		LabelOwnerPidNS: o.PidNS,
	}
}

// ownerFromLabels is the inverse of labels; ok is false when the labels do
// not name an owner (a container someone else labelled by hand).
func ownerFromLabels(l map[string]string) (o owner, ok bool) {
	pid, err1 := strconv.Atoi(l[LabelOwnerPID])
	start, err2 := strconv.ParseUint(l[LabelOwnerStart], 10, 64)
	if err1 != nil || err2 != nil {
		return owner{}, false
	}
	return owner{PID: pid, Start: start, Boot: l[LabelOwnerBoot], PidNS: l[LabelOwnerPidNS]}, true
}

// dirName is the name of a run directory: the owner is encoded in it so
// the reaper can judge a directory without its container (removed by hand,
// or never created).
func (o owner) dirName(token string) string {
	return fmt.Sprintf("%d.%d.%s", o.PID, o.Start, token)
}

// ownerFromDirName parses a dirName; the boot id is not part of it.
func ownerFromDirName(name string) (owner, bool) {
	parts := strings.SplitN(name, ".", 3)
	if len(parts) != 3 || parts[2] == "" {
		return owner{}, false
	}
	pid, err1 := strconv.Atoi(parts[0])
	start, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return owner{}, false
	}
	return owner{PID: pid, Start: start}, true
}
