package kube

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// Defaults of Config and sandbox.Limits.
const (
	DefaultNamespace   = "rollcage"
	DefaultAgentImage  = "rollcage/agent:latest"
	DefaultLease       = hostside.DefaultLease
	DefaultMaxCreating = 8
	DefaultMaxAlive    = hostside.DefaultMaxAlive
	DefaultMemoryBytes = hostside.DefaultMemoryBytes
	DefaultCPUs        = hostside.DefaultCPUs
	DefaultPids        = hostside.DefaultPids
	DefaultDiskBytes   = hostside.DefaultDiskBytes
	DefaultStart       = 2 * time.Minute
)

// Config configures a Backend.
type Config struct {
	// Kubeconfig is the kubeconfig file to use. Empty: $KUBECONFIG, else
	// the in-cluster config (rollcage running in a pod).
	Kubeconfig string
	// Namespace the sandbox pods run in. Empty: "rollcage".
	Namespace string
	// Node, when set, is written into every pod's nodeName, so no
	// scheduler is involved (the single-node cluster of scripts/kube-up.sh
	// has none). Empty: the cluster's scheduler places the pods.
	Node string
	// AgentImage holds /rollcage-agent (scripts/kube-up.sh builds it FROM
	// scratch). Empty: rollcage/agent:latest.
	AgentImage string
	// PullPolicy of the pods' images. Empty: Never (the images are on the
	// nodes already); set IfNotPresent for a cluster that pulls.
	PullPolicy string
	// Lease is how long an agent keeps its pod without hearing from the
	// host; the client pings every Lease/3. Zero: 60s.
	Lease time.Duration
	// StartTimeout bounds one pod's start, from create to the agent's
	// answer. Zero: 2 minutes.
	StartTimeout time.Duration
	// MaxCreating bounds the pods being started at once. Zero: 8.
	MaxCreating int
	// MaxAlive bounds the pods alive at once, warm ones included. Zero: 256.
	MaxAlive int
	// Pool is the number of warm pods kept per image.
	Pool map[string]int
	// DefaultLimits fill the zero fields of a Spec's Limits (2 GiB, 1 CPU,
	// 512 pids, 10 GiB disk).
	DefaultLimits sandbox.Limits
	// Requests are each pod's resource requests, what the scheduler and
	// the kubelet's admission count. Zero fields: 50m CPU, 64 MiB memory
	// (limits above bound what a sandbox may use).
	Requests Requests
	// Logger receives lifecycle logs. Nil: discard.
	Logger *slog.Logger
}

// Requests are a pod's resource requests.
type Requests struct {
	MilliCPU    int64
	MemoryBytes int64
}

// Validate reports a configuration that cannot work, in one line each.
func (c Config) Validate() error {
	// MaxCreating's default is not the container backends': said here.
	errs := []error{hostside.ValidateConfig("kube config", c.Lease, max(c.MaxCreating, 0), c.MaxAlive, c.Pool, c.DefaultLimits)}
	if c.MaxCreating < 0 {
		errs = append(errs, fmt.Errorf("kube config: MaxCreating %d is negative: use 0 for the default (%d)", c.MaxCreating, DefaultMaxCreating))
	}
	if c.StartTimeout < 0 {
		errs = append(errs, errors.New("kube config: StartTimeout is negative: use 0 for the default (2m)"))
	}
	switch c.PullPolicy {
	case "", "Never", "IfNotPresent", "Always":
	default:
		errs = append(errs, fmt.Errorf("kube config: PullPolicy %q: use Never, IfNotPresent or Always", c.PullPolicy))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	c.Namespace = cmp.Or(c.Namespace, DefaultNamespace)
	c.AgentImage = cmp.Or(c.AgentImage, DefaultAgentImage)
	c.PullPolicy = cmp.Or(c.PullPolicy, "Never")
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.StartTimeout = cmp.Or(c.StartTimeout, DefaultStart)
	c.MaxCreating = cmp.Or(c.MaxCreating, DefaultMaxCreating)
	c.MaxAlive = cmp.Or(c.MaxAlive, DefaultMaxAlive)
	c.DefaultLimits = hostside.ResolveLimits(c.DefaultLimits, hostside.DefaultLimits)
	c.Requests.MilliCPU = cmp.Or(c.Requests.MilliCPU, 50)
	c.Requests.MemoryBytes = cmp.Or(c.Requests.MemoryBytes, 64<<20)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
