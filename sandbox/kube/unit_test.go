package kube

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/sandboxtest"
)

// TestPodFor pins the pod a sandbox runs in to the golden file, and checks
// the security invariants whatever the golden file says.
func TestPodFor(t *testing.T) {
	p := podFor(podParams{
		Name: "rollcage-ep-1-0a1b2c3d", Namespace: "rollcage", Node: "node-1",
		Image: "rollcage/base:latest", AgentImage: "rollcage/agent:latest", PullPolicy: corev1.PullNever,
		Labels:  map[string]string{LabelManaged: "true", LabelOwner: "0123456789ab", LabelEpisode: "ep-1"},
		Episode: "ep/1", Limits: sandbox.Limits{MemoryBytes: 2 << 30, CPUs: 1, Pids: 512, DiskBytes: 10 << 30},
		Requests: Requests{MilliCPU: 50, MemoryBytes: 64 << 20}, Lease: time.Minute, Workdir: "/workspace",
	})
	sandboxtest.GoldenJSON(t, filepath.Join("testdata", "pod.golden.json"), p)

	s := p.Spec
	if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
		t.Error("service account token mounted")
	}
	if s.HostNetwork || s.HostPID || s.HostIPC {
		t.Error("host namespaces shared")
	}
	if s.EnableServiceLinks == nil || *s.EnableServiceLinks {
		t.Error("service links injected")
	}
	for _, v := range s.Volumes {
		if v.HostPath != nil {
			t.Errorf("host path volume %s", v.Name)
		}
	}
	for _, c := range append(append([]corev1.Container{}, s.InitContainers...), s.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: privilege escalation allowed", c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s: privileged", c.Name)
		}
		if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s: capabilities not all dropped", c.Name)
		}
		for _, cp := range sc.Capabilities.Add {
			switch cp {
			case "CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL":
			default:
				t.Errorf("%s: capability %s added", c.Name, cp)
			}
		}
		if c.Resources.Limits.Memory().IsZero() || c.Resources.Limits.Cpu().IsZero() {
			t.Errorf("%s: no memory or CPU limit", c.Name)
		}
	}
	main := s.Containers[0]
	if !strings.Contains(strings.Join(main.Args, " "), "--user 1000:1000") {
		t.Errorf("agent args %q do not switch to the sandbox user", main.Args)
	}
	if !main.VolumeMounts[0].ReadOnly {
		t.Error("the agent's volume is writable in the sandbox container")
	}
}

func TestPodName(t *testing.T) {
	for _, tc := range []struct{ episode, want string }{
		{"ep-1", "rollcage-ep-1-abcd"},
		{"Task/Run_7.x", "rollcage-task-run-7-x-abcd"},
		{"", "rollcage-abcd"},
		{"///", "rollcage-abcd"},
		{strings.Repeat("a", 80), "rollcage-" + strings.Repeat("a", 40) + "-abcd"},
	} {
		if got := podName(tc.episode, "abcd"); got != tc.want {
			t.Errorf("podName(%q) = %q, want %q", tc.episode, got, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, ""},
		{Config{Config: host.Config{Lease: time.Second}}, "use at least 3s"},
		{Config{PullPolicy: "Sometimes"}, "PullPolicy"},
		{Config{Config: host.Config{Pool: map[string]int{"img": 300}}}, "no room under MaxAlive"},
		{Config{Config: host.Config{DefaultLimits: sandbox.Limits{Pids: 3}}}, "at least 8"},
		{Config{Config: host.Config{MaxAlive: -1}}, "MaxAlive -1 is negative"},
		{Config{Config: host.Config{MaxCreating: -2}}, "kube config: MaxCreating -2 is negative: use 0 for the default (8)"},
		{Config{Config: host.Config{AgentBinary: "/bin/rollcage-agent"}}, "kube config: AgentBinary is the container backends'"},
		{Config{Config: host.Config{StateDir: "/tmp/x"}}, "kube config: StateDir is the container backends'"},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%+v) = %v, want error containing %q", tc.cfg, err, tc.want)
		}
	}
}

// TestConfigDefaults: the zero Config's fields as New uses them; the
// shared ones are host's but for MaxCreating, which is this backend's.
func TestConfigDefaults(t *testing.T) {
	got := Config{}.withDefaults()
	if got.Logger == nil {
		t.Error("withDefaults left Logger nil")
	}
	got.Logger = nil
	want := Config{Namespace: "rollcage", AgentImage: "rollcage/agent:latest", PullPolicy: "Never", StartTimeout: 2 * time.Minute,
		Requests: Requests{MilliCPU: 50, MemoryBytes: 64 << 20},
		Config: host.Config{Lease: 60 * time.Second, MaxCreating: 8, MaxAlive: 256,
			DefaultLimits: sandbox.Limits{MemoryBytes: 2 << 30, CPUs: 1, Pids: 512, DiskBytes: 10 << 30}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("withDefaults (-want +got):\n%s", diff)
	}
}
