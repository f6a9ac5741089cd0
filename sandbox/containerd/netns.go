package containerd

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// loopbackUp brings lo up in the network namespace of pid (a created,
// not yet started task), as Docker's "none" network does: the namespace
// has no other interface, so nothing leaves the sandbox, but 127.0.0.1
// works (the egress relay, a test's own server). The thread that enters
// the namespace stays locked and ends with its goroutine, so no other
// goroutine ever runs in that namespace.
func loopbackUp(pid int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		errc <- func() error {
			ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
			if err != nil {
				return fmt.Errorf("loopback: the task's network namespace: %w", err)
			}
			defer ns.Close()
			if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("loopback: enter the task's network namespace (rollcage must run as root): %w", err)
			}
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("loopback: socket: %w", err)
			}
			defer unix.Close(fd)
			ifr, err := unix.NewIfreq("lo")
			if err != nil {
				return fmt.Errorf("loopback: %w", err)
			}
			if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
				return fmt.Errorf("loopback: read lo's flags: %w", err)
			}
			ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
			if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
				return fmt.Errorf("loopback: bring lo up: %w", err)
			}
			return nil
		}()
	}()
	return <-errc
}
