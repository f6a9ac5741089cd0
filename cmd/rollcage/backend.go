package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/containerd"
	"github.com/rollcage/rollcage/sandbox/docker"
	"github.com/rollcage/rollcage/sandbox/host"
	"github.com/rollcage/rollcage/sandbox/kube"
)

// Backends of --backend.
const (
	backendDocker     = "docker"
	backendContainerd = "containerd"
	backendKube       = "kubernetes"
)

// backendFlags are --backend and the flags of the Kubernetes backend.
type backendFlags struct {
	kind       string
	kubeconfig string
	namespace  string
	node       string
	pull       string
	agentImage string
}

// addBackendFlag is --backend, the sandbox backend of a command that
// starts sandboxes, with --kubeconfig and the other flags of --backend
// kubernetes.
func addBackendFlag(fs *flag.FlagSet) *backendFlags {
	f := &backendFlags{}
	fs.StringVar(&f.kind, "backend", envOr("ROLLCAGE_BACKEND", backendDocker), "sandbox backend: docker; containerd (its own namespace on the machine's containerd; images imported from Docker's store); or kubernetes (pods in --kube-namespace of the cluster of --kubeconfig) (env ROLLCAGE_BACKEND)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster, with --backend kubernetes (default: $KUBECONFIG, else the in-cluster config)")
	fs.StringVar(&f.namespace, "kube-namespace", envOr("ROLLCAGE_KUBE_NAMESPACE", kube.DefaultNamespace), "namespace of the sandbox pods, with --backend kubernetes (env ROLLCAGE_KUBE_NAMESPACE)")
	fs.StringVar(&f.node, "kube-node", os.Getenv("ROLLCAGE_KUBE_NODE"), "node every sandbox pod runs on, for a cluster with no scheduler such as scripts/kube-up.sh's (env ROLLCAGE_KUBE_NODE); default: the scheduler places them")
	fs.StringVar(&f.pull, "kube-pull-policy", envOr("ROLLCAGE_KUBE_PULL_POLICY", "Never"), "image pull policy of the sandbox pods: Never (images imported on the nodes), IfNotPresent or Always (env ROLLCAGE_KUBE_PULL_POLICY)")
	fs.StringVar(&f.agentImage, "kube-agent-image", envOr("ROLLCAGE_KUBE_AGENT_IMAGE", kube.DefaultAgentImage), "image holding /rollcage-agent, copied into each pod by its init container (env ROLLCAGE_KUBE_AGENT_IMAGE)")
	return f
}

// check refuses --kubeconfig with another backend, and an unknown backend.
func (f *backendFlags) check() error {
	switch f.kind {
	case backendDocker, backendContainerd, backendKube, "":
	default:
		return fmt.Errorf("--backend %q: use %s, %s or %s", f.kind, backendDocker, backendContainerd, backendKube)
	}
	if f.kubeconfig != "" && f.kind != backendKube {
		return fmt.Errorf("--kubeconfig is for --backend %s (the backend is %s): add --backend %s or drop --kubeconfig", backendKube, f.kind, backendKube)
	}
	return nil
}

func (f *backendFlags) kubeConfig(o backendOptions) kube.Config {
	return kube.Config{Kubeconfig: f.kubeconfig, Namespace: f.namespace, Node: f.node, PullPolicy: f.pull, AgentImage: f.agentImage,
		Config: host.Config{Pool: o.pool, DefaultLimits: o.limits, Logger: o.log}} // no StateDir: pods keep none
}

// backend is what the commands need of a sandbox backend beyond
// sandbox.Backend.
type backend interface {
	sandbox.Backend
	Close(ctx context.Context) error
	// RemoveEpisode removes the sandboxes of an episode whose owner is gone.
	RemoveEpisode(ctx context.Context, episodeID string) (int, error)
	// poolStats: sandboxes alive (warm included) and warm.
	poolStats() (alive, warm int)
}

type backendOptions struct {
	flags    *backendFlags
	stateDir string
	pool     map[string]int
	limits   sandbox.Limits
	log      *slog.Logger
}

// hostConfig is the configuration of a container backend the options set.
func (o backendOptions) hostConfig() host.Config {
	return host.Config{StateDir: o.stateDir, Pool: o.pool, DefaultLimits: o.limits, Logger: o.log}
}

// openBackend starts the backend --backend names.
func openBackend(ctx context.Context, o backendOptions) (backend, error) {
	if err := o.flags.check(); err != nil {
		return nil, err
	}
	switch o.flags.kind {
	case backendDocker, "":
		b, err := docker.New(ctx, docker.Config(o.hostConfig()))
		if err != nil {
			return nil, err
		}
		return dockerBackend{b}, nil
	case backendContainerd:
		b, err := containerd.New(ctx, containerd.Config{ImportFromDocker: true, Config: o.hostConfig()})
		if err != nil {
			return nil, err
		}
		return &containerdBackend{Backend: b, dockerSealer: dockerSealer{log: o.log}}, nil
	default: // kubernetes; check refused the rest
		b, err := kube.New(ctx, o.flags.kubeConfig(o))
		if err != nil {
			return nil, err
		}
		return &kubeBackend{Backend: b, dockerSealer: dockerSealer{log: o.log}}, nil
	}
}

type dockerBackend struct{ *docker.Backend }

func (b dockerBackend) poolStats() (int, int) { st := b.Stats(); return st.Alive, st.Warm }

// dockerSealer seals task images with Docker's backend, for a backend with
// no sealing of its own: the sealed image is made in Docker's store, and
// the backend then runs it like any other image (containerd imports it
// from Docker; Kubernetes nodes need it imported or pushed).
type dockerSealer struct {
	log *slog.Logger

	mu     sync.Mutex
	sealer *docker.Backend // guarded by mu; started at the first Seal
}

// Seal seals spec's image in Docker's store.
func (s *dockerSealer) Seal(ctx context.Context, spec sandbox.SealSpec) (sandbox.Sealed, error) {
	s.mu.Lock()
	if s.sealer == nil {
		d, err := docker.New(ctx, docker.Config{Logger: s.log})
		if err != nil {
			s.mu.Unlock()
			return sandbox.Sealed{}, fmt.Errorf("seal with Docker: %w", err)
		}
		s.sealer = d
	}
	sealer := s.sealer
	s.mu.Unlock()
	return sealer.Seal(ctx, spec)
}

func (s *dockerSealer) close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealer != nil {
		return s.sealer.Close(ctx)
	}
	return nil
}

// containerdBackend seals task images with Docker (the sealed image is
// then imported like any other).
type containerdBackend struct {
	*containerd.Backend
	dockerSealer
}

func (b *containerdBackend) poolStats() (int, int) { st := b.Stats(); return st.Alive, st.Warm }

func (b *containerdBackend) Close(ctx context.Context) error {
	return errors.Join(b.Backend.Close(ctx), b.dockerSealer.close(ctx))
}

// kubeBackend seals task images with Docker on this machine; the pods
// find the sealed image on their node (scripts/kube-up.sh imports the
// ones KUBE_IMAGES names) or pull it.
type kubeBackend struct {
	*kube.Backend
	dockerSealer
}

func (b *kubeBackend) poolStats() (int, int) { st := b.Stats(); return st.Alive, st.Warm }

func (b *kubeBackend) Close(ctx context.Context) error {
	return errors.Join(b.Backend.Close(ctx), b.dockerSealer.close(ctx))
}
