package containerd

import (
	"time"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// specParams is everything that decides a container's OCI spec besides
// its image's configuration.
type specParams struct {
	RunDir      string // host path, mounted at hostside.RunDirPath
	HostsFile   string // host path, mounted read-only at /etc/hosts
	AgentBinary string // host path, mounted read-only at hostside.AgentPath
	ProxySocket string // host path; non-empty only in proxy mode
	Limits      sandbox.Limits
	Lease       time.Duration
	SocketOwner string // "uid:gid" of the host process, "" when root
	Hostname    string
}

// hostsFile is the /etc/hosts of a sandbox named hostname.
func hostsFile(hostname string) string {
	return "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + hostname + "\n"
}

// cfsPeriod is the CPU quota's period, in microseconds.
const cfsPeriod = 100_000

// specOpts is the container's OCI spec: the image's environment, then
// securityOpts.
func specOpts(img oci.Image, p specParams) []oci.SpecOpts {
	return append([]oci.SpecOpts{oci.WithImageConfig(img)}, securityOpts(p)...)
}

// securityOpts is the pure part of the spec, free of I/O so that its
// security-relevant output is golden-tested: the agent as PID 1 (root,
// seven capabilities, none ambient, no new privileges, Docker's default
// seccomp profile), the mounts it needs and no others, the limits, and
// the default spec's namespaces (a network namespace of its own, empty
// but for loopback).
func securityOpts(p specParams) []oci.SpecOpts {
	mounts := []specs.Mount{
		{Type: "bind", Source: p.AgentBinary, Destination: hostside.AgentPath, Options: []string{"rbind", "ro", "nosuid", "nodev"}},
		{Type: "bind", Source: p.RunDir, Destination: hostside.RunDirPath, Options: []string{"rbind", "rw", "nosuid", "nodev", "noexec"}},
		// As in Docker: the container's own cgroup, read-only, and an
		// /etc/hosts that names localhost.
		{Type: "cgroup", Source: "cgroup", Destination: "/sys/fs/cgroup", Options: []string{"ro", "nosuid", "noexec", "nodev"}},
		{Type: "bind", Source: p.HostsFile, Destination: "/etc/hosts", Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}},
	}
	if p.ProxySocket != "" {
		mounts = append(mounts, specs.Mount{Type: "bind", Source: p.ProxySocket, Destination: hostside.RunDirPath + "/" + hostside.ProxySockName, Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}})
	}
	caps := make([]string, 0, len(hostside.AgentCaps)+1)
	for _, c := range hostside.AgentCaps {
		caps = append(caps, "CAP_"+c)
	}
	// And one more than on Docker: a warm sandbox becomes a fork's child by
	// changing the agent's root to the child's file system, which the host
	// mounts into the sandbox's mount namespace (warmfork.go). Commands
	// lose it with the others at the uid change.
	caps = append(caps, "CAP_SYS_CHROOT")
	return []oci.SpecOpts{
		oci.WithProcessArgs(append([]string{hostside.AgentPath}, hostside.AgentArgs(p.Lease, p.SocketOwner, p.ProxySocket != "", false)...)...),
		oci.WithUIDGID(0, 0), // the agent only; commands run as hostside.SandboxUser
		oci.WithProcessCwd("/"),
		oci.WithHostname(p.Hostname),
		oci.WithoutRunMount, // the image's /run, as in Docker, not a tmpfs over it
		oci.WithMounts(mounts),
		oci.WithCapabilities(caps),
		oci.WithAmbientCapabilities(nil),
		oci.WithNoNewPrivileges,
		seccomp.WithDefaultProfile(), // after the capabilities: the profile follows them
		oci.WithMemoryLimit(uint64(p.Limits.MemoryBytes)),
		oci.WithMemorySwap(p.Limits.MemoryBytes), // no swap beyond the limit
		oci.WithCPUCFS(int64(p.Limits.CPUs*cfsPeriod), cfsPeriod),
		oci.WithPidsLimit(p.Limits.Pids + hostside.AgentPids),
	}
}
