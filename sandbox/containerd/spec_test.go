package containerd

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestSpecGolden pins the security-relevant OCI spec (all of it but the
// image's environment and the seccomp profile, which is containerd's copy
// of Docker's and checked below by its verdicts): a change here must be a
// decision, reviewed in the diff of the golden file.
func TestSpecGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    specParams
	}{
		{"default", specParams{
			RunDir: "/var/lib/rollcage/run/1.2.0a1b2c3d", HostsFile: "/var/lib/rollcage/run/1.2.0a1b2c3d/hosts",
			AgentBinary: "/usr/local/bin/rollcage-agent", Hostname: "rollcage-ep1-0a1b2c3d",
			Limits: sandbox.Limits{MemoryBytes: host.DefaultMemoryBytes, CPUs: host.DefaultCPUs, Pids: host.DefaultPids},
			Lease:  host.DefaultLease,
		}},
		{"proxy-nonroot", specParams{
			RunDir: "/run/user/1001/rollcage/1.2.0a1b2c3d", HostsFile: "/run/user/1001/rollcage/1.2.0a1b2c3d/hosts",
			AgentBinary: "/opt/rollcage/rollcage-agent", Hostname: "rollcage-ep2-0a1b2c3d",
			ProxySocket: "/run/user/1001/rollcage/proxy-ep2.sock",
			Limits:      sandbox.Limits{MemoryBytes: 512 << 20, CPUs: 0.5, Pids: 64},
			Lease:       30 * time.Second, SocketOwner: "1001:1001",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := namespaces.WithNamespace(t.Context(), DefaultNamespace)
			s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "rollcage-ep-0a1b2c3d"}, securityOpts(tc.p)...)
			if err != nil {
				t.Fatal(err)
			}
			if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != specs.ActErrno {
				t.Fatalf("seccomp: %+v, want a profile that denies by default", s.Linux.Seccomp)
			}
			for _, sc := range s.Linux.Seccomp.Syscalls {
				if sc.Action == specs.ActAllow && len(sc.Args) == 0 && slices.Contains(sc.Names, "mount") {
					t.Errorf("seccomp allows mount unconditionally")
				}
			}
			s.Linux.Seccomp = nil
			sandboxtest.GoldenJSON(t, filepath.Join("testdata", "spec-"+tc.name+".json"), s)
			if len(s.Process.Capabilities.Ambient) != 0 || !s.Process.NoNewPrivileges || s.Process.User.UID != 0 {
				t.Errorf("agent process: caps %+v, no-new-privileges %v, uid %d", s.Process.Capabilities, s.Process.NoNewPrivileges, s.Process.User.UID)
			}
			if !slices.ContainsFunc(s.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.NetworkNamespace && n.Path == "" }) {
				t.Errorf("no network namespace of its own: %+v", s.Linux.Namespaces)
			}
			for _, m := range s.Mounts {
				if m.Source == "/var/run/docker.sock" || filepath.Base(m.Source) == "containerd.sock" {
					t.Errorf("engine socket mounted: %+v", m)
				}
			}
		})
	}
}

// TestConfigValidate: the shared checks speak as this backend's.
func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	err := Config{Config: host.Config{MaxAlive: 2, Pool: map[string]int{"rollcage/base:latest": 2}}}.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "containerd config: ") || !strings.Contains(err.Error(), "no room under MaxAlive") {
		t.Errorf("pool filling MaxAlive: %v", err)
	}
	if _, err := imageName("Not A Ref"); err == nil || !strings.Contains(err.Error(), "rollcage/base:latest") {
		t.Errorf("bad image name: %v, want a hint", err)
	}
}
