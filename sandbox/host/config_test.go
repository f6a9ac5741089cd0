package host

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollcage/rollcage/sandbox"
)

// TestCheck pins every line Check can say: the backends' Validate
// messages are these, with their name.
func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // the whole error; "" means valid
	}{
		{"zero", Config{}, ""},
		{"pool", Config{Pool: map[string]int{"rollcage/base:latest": 4}}, ""},
		{"disk", Config{DefaultLimits: sandbox.Limits{DiskBytes: 64 << 20}}, ""},
		{"negative lease", Config{Lease: -time.Second}, "b config: Lease -1s is negative: use 0 for the default (1m0s) or a positive duration"},
		{"short lease", Config{Lease: time.Second}, "b config: Lease 1s is too short: use at least 3s (heartbeats go every Lease/3)"},
		{"negative creating", Config{MaxCreating: -1}, "b config: MaxCreating -1 is negative: use 0 for the default (7)"},
		{"negative alive", Config{MaxAlive: -1}, "b config: MaxAlive -1 is negative: use 0 for the default (256)"},
		{"pool fills alive", Config{MaxAlive: 4, Pool: map[string]int{"a": 2, "b": 2}},
			"b config: warm pool of 4 containers leaves no room under MaxAlive 4: lower Pool or raise MaxAlive"},
		{"pool fills default alive", Config{Pool: map[string]int{"a": 256}},
			"b config: warm pool of 256 containers leaves no room under MaxAlive 256: lower Pool or raise MaxAlive"},
		{"negative pool", Config{Pool: map[string]int{"a": -1}}, `b config: Pool["a"] = -1 is negative: use 0 to turn the pool off`},
		{"unnamed pool", Config{Pool: map[string]int{"": 1}}, "b config: Pool has an empty image name: key the pool by image reference"},
		{"negative memory", Config{DefaultLimits: sandbox.Limits{MemoryBytes: -1}}, "b config: DefaultLimits: MemoryBytes -1 is negative: use 0 for the default"},
		{"tiny memory", Config{DefaultLimits: sandbox.Limits{MemoryBytes: 1 << 20}}, "b config: DefaultLimits: MemoryBytes 1048576 is below the 6 MiB minimum: raise it"},
		{"negative cpus", Config{DefaultLimits: sandbox.Limits{CPUs: -0.5}}, "b config: DefaultLimits: CPUs -0.5 is negative: use 0 for the default"},
		{"negative pids", Config{DefaultLimits: sandbox.Limits{Pids: -1}}, "b config: DefaultLimits: Limits.Pids -1 is negative: use 0 for the default"},
		{"tiny pids", Config{DefaultLimits: sandbox.Limits{Pids: 2}}, "b config: DefaultLimits: Limits.Pids 2 leaves no room for the agent and a shell: use at least 8"},
		{"negative disk", Config{DefaultLimits: sandbox.Limits{DiskBytes: -1}}, "b config: DefaultLimits: DiskBytes -1 is negative: use 0 for the default (10 GiB)"},
		{"tiny disk", Config{DefaultLimits: sandbox.Limits{DiskBytes: 1 << 20}}, "b config: DefaultLimits: DiskBytes 1048576 is below 16 MiB, too little for a shell to work in: raise it"},
		{"two faults", Config{Lease: time.Second, MaxAlive: -2},
			"b config: Lease 1s is too short: use at least 3s (heartbeats go every Lease/3)\nb config: MaxAlive -2 is negative: use 0 for the default (256)"},
	}
	for _, tc := range tests {
		got := ""
		if err := tc.cfg.Check("b", 7); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: Check = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFill(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	tests := []struct {
		name string
		cfg  Config
		want Config
	}{
		{"zero", Config{}, Config{Lease: DefaultLease, MaxCreating: 7, MaxAlive: DefaultMaxAlive, DefaultLimits: DefaultLimits}},
		{"set fields kept", Config{AgentBinary: "a", StateDir: "s", Lease: time.Hour, MaxCreating: 1, MaxAlive: 2, Pool: map[string]int{"i": 1},
			DefaultLimits: sandbox.Limits{Pids: 64}, Logger: log},
			Config{AgentBinary: "a", StateDir: "s", Lease: time.Hour, MaxCreating: 1, MaxAlive: 2, Pool: map[string]int{"i": 1},
				DefaultLimits: sandbox.Limits{MemoryBytes: DefaultMemoryBytes, CPUs: DefaultCPUs, Pids: 64, DiskBytes: DefaultDiskBytes}, Logger: log}},
	}
	for _, tc := range tests {
		got := tc.cfg.Fill(7)
		if got.Logger == nil {
			t.Errorf("%s: Fill left Logger nil", tc.name)
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Config{}, "Logger")); diff != "" {
			t.Errorf("%s: Fill (-want +got):\n%s", tc.name, diff)
		}
		if tc.cfg.Logger != nil && got.Logger != tc.cfg.Logger {
			t.Errorf("%s: Fill replaced the Logger", tc.name)
		}
	}
}

func TestResolve(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rollcage-agent")
	if err := os.WriteFile(bin, []byte("#!"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(AgentBinEnv, bin)
	got, err := Config{StateDir: "/x"}.Resolve("b")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{AgentBinary: bin, StateDir: "/x", Lease: DefaultLease, MaxCreating: DefaultMaxCreating, MaxAlive: DefaultMaxAlive, DefaultLimits: DefaultLimits}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Config{}, "Logger")); diff != "" {
		t.Errorf("Resolve (-want +got):\n%s", diff)
	}
	if got, err := (Config{}).Resolve("b"); err != nil || got.StateDir != DefaultStateDir() {
		t.Errorf("Resolve of an empty StateDir: %q, %v; want %q", got.StateDir, err, DefaultStateDir())
	}
	wantErr := "b config: MaxCreating -1 is negative: use 0 for the default (4)"
	if _, err := (Config{MaxCreating: -1}).Resolve("b"); err == nil || err.Error() != wantErr {
		t.Errorf("Resolve of a negative MaxCreating: %v, want %q", err, wantErr)
	}
	absent := filepath.Join(t.TempDir(), "absent")
	t.Setenv(AgentBinEnv, absent)
	_, err = (Config{}).Resolve("b")
	wantErr = fmt.Sprintf("b: agent binary %s not found: run 'make build' or set ROLLCAGE_AGENT_BIN: %v", absent, sandbox.ErrUnavailable)
	if err == nil || err.Error() != wantErr || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("missing agent binary: %v, want %q wrapping ErrUnavailable", err, wantErr)
	}
}
