package docker

import (
	"maps"
	"slices"
	"strconv"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// createParams is everything that decides a container's configuration.
type createParams struct {
	Name        string
	Image       string
	Labels      map[string]string
	RunDir      string // host path, mounted at hostside.RunDirPath
	AgentBinary string // host path, mounted read-only at hostside.AgentPath
	ProxySocket string // host path; non-empty only in proxy mode
	Limits      sandbox.Limits
	StorageSize int64 // bytes for --storage-opt size=; 0: not used (watchdog)
	Lease       time.Duration
	SocketOwner string // "uid:gid" of the host process, "" when root
	// Root: the policy is root in a user namespace (sandbox.UserRoot);
	// only on an engine that remaps users.
	Root bool
}

// containerConfig is the pure translation of createParams into Docker's
// types, kept free of I/O so its security-relevant output is golden-tested.
func containerConfig(p createParams) (*dcontainer.Config, *dcontainer.HostConfig) {
	args := hostside.AgentArgs(p.Lease, p.SocketOwner, p.ProxySocket != "", p.Root)
	mounts := []mount.Mount{
		{Type: mount.TypeBind, Source: p.AgentBinary, Target: hostside.AgentPath, ReadOnly: true},
		{Type: mount.TypeBind, Source: p.RunDir, Target: hostside.RunDirPath},
	}
	if p.ProxySocket != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: p.ProxySocket, Target: hostside.RunDirPath + "/" + hostside.ProxySockName})
	}
	pids := p.Limits.Pids + hostside.AgentPids
	cfg := &dcontainer.Config{
		Image:      p.Image,
		User:       "0:0", // the agent only; commands run as hostside.SandboxUser
		Entrypoint: []string{hostside.AgentPath},
		// A non-empty Cmd replaces the image's CMD, which would otherwise
		// be appended to the agent's arguments.
		Cmd:        args,
		WorkingDir: "/",
		Labels:     maps.Clone(p.Labels),
		// No TTY and no stdin: the agent speaks on its socket only.
		AttachStdout: false,
		AttachStderr: false,
	}
	host := &dcontainer.HostConfig{
		NetworkMode:    "none",
		Mounts:         mounts,
		CapDrop:        []string{"ALL"},
		CapAdd:         append(slices.Clip(hostside.AgentCaps), "SYS_CHROOT"), // chroot: a warm fork child's agent changes its root
		SecurityOpt:    []string{"no-new-privileges"},
		IpcMode:        "private",
		ReadonlyRootfs: false,
		LogConfig: dcontainer.LogConfig{
			Type:   "json-file",
			Config: map[string]string{"max-size": "1m", "max-file": "1"},
		},
		Resources: dcontainer.Resources{
			Memory:     p.Limits.MemoryBytes,
			MemorySwap: p.Limits.MemoryBytes, // no swap beyond the limit
			NanoCPUs:   int64(p.Limits.CPUs * 1e9),
			PidsLimit:  &pids,
		},
	}
	if p.Root {
		// The agent makes the policy's user namespaces and mounts the
		// proc its shells see (agent/nest.go). A proc can be mounted in a
		// user namespace only where the container's own is unmasked; the
		// agent puts the masks back over the policy's.
		host.CapAdd = slices.Clone(hostside.RootAgentCaps)
		host.MaskedPaths, host.ReadonlyPaths = []string{}, []string{}
	}
	if p.StorageSize > 0 {
		host.StorageOpt = map[string]string{"size": strconv.FormatInt(p.StorageSize, 10)}
	}
	return cfg, host
}

// containerName and randomToken name containers like every backend does.
var (
	containerName = hostside.ContainerName
	randomToken   = hostside.RandomToken
)
