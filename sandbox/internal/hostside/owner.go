package hostside

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/rollcage/rollcage/sandbox/host"
)

// Owner identifies a host process for the reaper: a pid alone could be
// reused after a crash, so the kernel's start time of the process (clock
// ticks since boot, field 22 of /proc/<pid>/stat) and the boot id go with it.
type Owner struct {
	PID   int
	Start uint64
	Boot  string
	// PidNS is the Owner's pid namespace (/proc/self/ns/pid): a pid is only
	// meaningful there, so a rollcage in a container (the compose gateway)
	// never judges the host's processes, nor the host its.
	PidNS string
}

// SelfOwner is the identity of this process.
func SelfOwner() (Owner, error) {
	pid := os.Getpid()
	start, err := procStart(pid)
	if err != nil {
		return Owner{}, fmt.Errorf("own process start time: %w", err)
	}
	return Owner{PID: pid, Start: start, Boot: BootID(), PidNS: PidNamespace()}, nil
}

// PidNamespace names this process's pid namespace, e.g. "pid:[4026531836]".
func PidNamespace() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
}

// Alive reports whether the process o names still runs: same pid, same
// start time.
func (o Owner) Alive() bool {
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

func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (o Owner) Labels() map[string]string {
	return map[string]string{
		host.LabelManaged:    "1",
		host.LabelOwnerPID:   strconv.Itoa(o.PID),
		host.LabelOwnerStart: strconv.FormatUint(o.Start, 10),
		host.LabelOwnerBoot:  o.Boot,
		host.LabelOwnerPidNS: o.PidNS,
	}
}

// OwnerFromLabels is the inverse of Labels; ok is false when the labels do
// not name an owner (a container someone else labelled by hand).
func OwnerFromLabels(l map[string]string) (o Owner, ok bool) {
	pid, err1 := strconv.Atoi(l[host.LabelOwnerPID])
	start, err2 := strconv.ParseUint(l[host.LabelOwnerStart], 10, 64)
	if err1 != nil || err2 != nil {
		return Owner{}, false
	}
	return Owner{PID: pid, Start: start, Boot: l[host.LabelOwnerBoot], PidNS: l[host.LabelOwnerPidNS]}, true
}

// DirName is the name of a run directory: the owner is encoded in it so
// the reaper can judge a directory without its container (removed by hand,
// or never created).
func (o Owner) DirName(token string) string {
	return fmt.Sprintf("%d.%d.%s", o.PID, o.Start, token)
}

// OwnerFromDirName parses a DirName; the boot id is not part of it.
func OwnerFromDirName(name string) (Owner, bool) {
	parts := strings.SplitN(name, ".", 3)
	if len(parts) != 3 || parts[2] == "" {
		return Owner{}, false
	}
	pid, err1 := strconv.Atoi(parts[0])
	start, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return Owner{}, false
	}
	return Owner{PID: pid, Start: start}, true
}
