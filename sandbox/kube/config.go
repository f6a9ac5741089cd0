package kube

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/rollcage/rollcage/sandbox/host"
)

// Defaults of Config's own fields, and of MaxCreating, which is this
// backend's and not the container backends' (host.DefaultMaxCreating).
const (
	DefaultNamespace   = "rollcage"
	DefaultAgentImage  = "rollcage/agent:latest"
	DefaultMaxCreating = 8
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
	// StartTimeout bounds one pod's start, from create to the agent's
	// answer. Zero: 2 minutes.
	StartTimeout time.Duration
	// Requests are each pod's resource requests, what the scheduler and
	// the kubelet's admission count. Zero fields: 50m CPU, 64 MiB memory
	// (DefaultLimits bound what a sandbox may use).
	Requests Requests
	// Config is what every backend has: the agent's lease, admission
	// (MaxCreating's zero is 8 here), MaxAlive, the warm pool of pods, the
	// default limits and the logger. Its AgentBinary and StateDir are the
	// container backends' and must stay empty: the pods' agent comes from
	// AgentImage and their state is in the cluster.
	host.Config
}

// Requests are a pod's resource requests.
type Requests struct {
	MilliCPU    int64
	MemoryBytes int64
}

// Validate reports a configuration that cannot work, in one line each.
func (c Config) Validate() error {
	errs := []error{c.Config.Check("kube", DefaultMaxCreating)}
	if c.AgentBinary != "" {
		errs = append(errs, errors.New("kube config: AgentBinary is the container backends': drop it (the pods' agent comes from AgentImage)"))
	}
	if c.StateDir != "" {
		errs = append(errs, errors.New("kube config: StateDir is the container backends': drop it (a pod's state is in the cluster)"))
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
	c.StartTimeout = cmp.Or(c.StartTimeout, DefaultStart)
	c.Config = c.Config.Fill(DefaultMaxCreating)
	c.Requests.MilliCPU = cmp.Or(c.Requests.MilliCPU, 50)
	c.Requests.MemoryBytes = cmp.Or(c.Requests.MemoryBytes, 64<<20)
	return c
}
