package docker

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

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
			Labels:      map[string]string{host.LabelManaged: "1", host.LabelEpisode: "ep1"},
			RunDir:      "/var/lib/rollcage/run/1.2.0a1b2c3d",
			AgentBinary: "/usr/local/bin/rollcage-agent",
			Limits:      sandbox.Limits{MemoryBytes: host.DefaultMemoryBytes, CPUs: host.DefaultCPUs, Pids: host.DefaultPids},
			Lease:       host.DefaultLease,
		}},
		{"proxy-nonroot", createParams{
			Name: "rollcage-ep2-0a1b2c3d", Image: "rollcage/demo:latest",
			Labels:      map[string]string{host.LabelManaged: "1", host.LabelEpisode: "ep2", "team": "rl"},
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
			sandboxtest.GoldenJSON(t, filepath.Join("testdata", tc.name+".golden.json"), map[string]any{"config": cfg, "host_config": host})
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

// TestConfigValidate: the shared checks (sandbox/host's tests) speak as
// this backend's, with the container backends' default MaxCreating.
func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	err := Config{Lease: time.Second, MaxCreating: -1}.Validate()
	want := "docker config: Lease 1s is too short: use at least 3s (heartbeats go every Lease/3)\n" +
		"docker config: MaxCreating -1 is negative: use 0 for the default (4)"
	if err == nil || err.Error() != want {
		t.Errorf("Validate: %v, want %q", err, want)
	}
}

func TestRemoveScript(t *testing.T) {
	tests := []struct {
		paths   []string
		want    string // a line the script must hold; "" with wantErr
		wantErr string
	}{
		{nil, "", ""},
		{[]string{"/r2e_tests"}, "rm -rf -- '/r2e_tests'", ""},
		{[]string{"r2e_tests"}, "", `remove "r2e_tests": give an absolute path below / without quotes`},
		{[]string{"/"}, "", `remove "/": give an absolute path below / without quotes`},
		{[]string{"/a'b"}, "", `remove "/a'b": give an absolute path below / without quotes`},
	}
	for _, tc := range tests {
		got, err := removeScript(tc.paths)
		switch {
		case tc.wantErr != "":
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("removeScript(%q): error %v, want %q", tc.paths, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("removeScript(%q): %v", tc.paths, err)
		case tc.want == "":
			if got != "" {
				t.Errorf("removeScript(%q) = %q, want empty", tc.paths, got)
			}
		case !strings.Contains(got, tc.want+"\n") || !strings.Contains(got, "exit 6"):
			t.Errorf("removeScript(%q) = %q; want a line %q and a check that exits 6", tc.paths, got, tc.want)
		}
	}
}
