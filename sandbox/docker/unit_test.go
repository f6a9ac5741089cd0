package docker

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// TestContainerConfigGolden pins the security-relevant container
// configuration: a change here must be a decision, reviewed in the diff of
// the golden file.
func TestContainerConfigGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    createParams
	}{
		{"default", createParams{
			Name: "rollcage-ep1-0a1b2c3d", Image: "rollcage/base:latest",
			Labels:      map[string]string{LabelManaged: "1", LabelEpisode: "ep1"},
			RunDir:      "/var/lib/rollcage/run/1.2.0a1b2c3d",
			AgentBinary: "/usr/local/bin/rollcage-agent",
			Limits:      sandbox.Limits{MemoryBytes: DefaultMemoryBytes, CPUs: DefaultCPUs, Pids: DefaultPids},
			Lease:       DefaultLease,
		}},
		{"proxy-nonroot", createParams{
			Name: "rollcage-ep2-0a1b2c3d", Image: "rollcage/demo:latest",
			Labels:      map[string]string{LabelManaged: "1", LabelEpisode: "ep2", "team": "rl"},
			RunDir:      "/run/user/1001/rollcage/1.2.0a1b2c3d",
			AgentBinary: "/opt/rollcage/rollcage-agent",
			ProxySocket: "/run/user/1001/rollcage/proxy-ep2.sock",
			Limits:      sandbox.Limits{MemoryBytes: 512 << 20, CPUs: 0.5, Pids: 64},
			Lease:       30 * time.Second,
			SocketOwner: "1001:1001",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, host := containerConfig(tc.p)
			sandboxtest.GoldenJSON(t, filepath.Join("testdata", tc.name+".golden.json"), map[string]any{"config": cfg, "host_config": host}, *update)
			// Invariants that must hold whatever the golden file says.
			if host.NetworkMode != "none" {
				t.Errorf("NetworkMode %q, want none", host.NetworkMode)
			}
			if host.Privileged || len(host.Binds) > 0 {
				t.Error("privileged or raw binds")
			}
			for _, m := range host.Mounts {
				if strings.Contains(m.Source, "docker.sock") {
					t.Errorf("Docker socket mounted: %+v", m)
				}
			}
			if diff := cmp.Diff([]string{"ALL"}, []string(host.CapDrop)); diff != "" {
				t.Errorf("CapDrop (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // substring; "" means valid
	}{
		{"zero", Config{}, ""},
		{"pool", Config{Pool: map[string]int{"rollcage/base:latest": 4}}, ""},
		{"negative lease", Config{Lease: -time.Second}, "Lease"},
		{"short lease", Config{Lease: time.Second}, "at least 3s"},
		{"negative creating", Config{MaxCreating: -1}, "MaxCreating"},
		{"pool fills alive", Config{MaxAlive: 4, Pool: map[string]int{"a": 2, "b": 2}}, "no room under MaxAlive"},
		{"negative pool", Config{Pool: map[string]int{"a": -1}}, "negative"},
		{"tiny memory", Config{DefaultLimits: sandbox.Limits{MemoryBytes: 1 << 20}}, "6 MiB"},
		{"tiny pids", Config{DefaultLimits: sandbox.Limits{Pids: 2}}, "at least 8"},
		{"negative disk", Config{DefaultLimits: sandbox.Limits{DiskBytes: -1}}, "DiskBytes"},
		{"tiny disk", Config{DefaultLimits: sandbox.Limits{DiskBytes: 1 << 20}}, "16 MiB"},
		{"disk", Config{DefaultLimits: sandbox.Limits{DiskBytes: 64 << 20}}, ""},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestResolve(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rollcage-agent")
	if err := os.WriteFile(bin, []byte("#!"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(AgentBinEnv, bin)
	got, err := Config{StateDir: "/x"}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		AgentBinary: bin, StateDir: "/x", Lease: DefaultLease, MaxCreating: DefaultMaxCreating, MaxAlive: DefaultMaxAlive,
		DefaultLimits: sandbox.Limits{MemoryBytes: DefaultMemoryBytes, CPUs: DefaultCPUs, Pids: DefaultPids, DiskBytes: DefaultDiskBytes},
	}
	got.Logger = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resolve (-want +got):\n%s", diff)
	}
	t.Setenv(AgentBinEnv, filepath.Join(t.TempDir(), "absent"))
	if _, err := (Config{}).resolve(); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("missing agent binary: %v, want a hint to run make build", err)
	}
}
