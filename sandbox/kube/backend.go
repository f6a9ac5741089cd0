package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// Timeouts of operations the caller's ctx does not bound.
const (
	pingTimeout     = 10 * time.Second
	teardownTimeout = 30 * time.Second
	shutdownTimeout = 2 * time.Second
)

// Backend creates sandboxes as pods. It is safe for concurrent use; Close
// drains the warm pool, closes every sandbox it created and gives up its
// owner Lease.
type Backend struct {
	cfg   Config
	rest  *rest.Config
	cs    kubernetes.Interface
	log   *slog.Logger
	owner string // this Backend's id: LabelOwner of its pods, suffix of its Lease

	slots *hostside.Slots[*pod] // admission, MaxAlive, the live set
	pool  *hostside.Pool[*pod]

	stop     context.CancelFunc // ends the refill and the Lease renewal
	loopDone sync.WaitGroup
}

var _ sandbox.Backend = (*Backend)(nil)

// RESTConfig loads the client configuration: the kubeconfig file when
// given (or $KUBECONFIG), else the in-cluster one.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kube: no cluster configured: pass --kubeconfig FILE or set KUBECONFIG (scripts/kube-up.sh env prints one): %w: %v", sandbox.ErrUnavailable, err)
		}
		return cfg, nil
	}
	if _, err := os.Stat(kubeconfig); err != nil {
		return nil, fmt.Errorf("kube: kubeconfig %s: %w: pass --kubeconfig FILE of a cluster (scripts/kube-up.sh env prints the local one's)", kubeconfig, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kube: kubeconfig %s: %s: fix the file or pass another with --kubeconfig", kubeconfig, oneLine(err.Error()))
	}
	return cfg, nil
}

// oneLine folds a multi-line message (client-go's parse errors) into one.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// GC connects to the cluster of cfg and deletes the pods of rollcage
// processes whose owner Lease is gone or expired (and those Leases),
// without taking a Lease of its own. It returns how many pods it deleted.
func GC(ctx context.Context, cfg Config) (int, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	cfg = cfg.withDefaults()
	_, cs, err := connect(ctx, cfg)
	if err != nil {
		return 0, err
	}
	return Reap(ctx, cs, cfg.Namespace, cfg.Logger)
}

// connect makes the client of cfg's cluster and checks that it answers
// with a list of one pod in the namespace, which the Role allows (a Get of
// the namespace is cluster-scoped and does not).
func connect(ctx context.Context, cfg Config) (*rest.Config, kubernetes.Interface, error) {
	rc, err := RESTConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	rc.QPS, rc.Burst = 100, 200 // one client serves every sandbox of the process
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("kube: client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if _, err := cs.CoreV1().Pods(cfg.Namespace).List(pctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, nil, apiErr("list pods in namespace "+cfg.Namespace, rc.Host, err)
	}
	return rc, cs, nil
}

// New connects to the cluster, makes sure the namespace's deny-all
// NetworkPolicy exists, takes an owner Lease, reaps the pods of dead
// owners and starts warming the pool.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	rc, cs, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	b := &Backend{cfg: cfg, rest: rc, cs: cs, log: cfg.Logger, owner: newOwnerID()}
	b.pool = hostside.NewPool(cfg.Pool, func(p *pod) string { return p.image })
	b.slots = hostside.NewSlots("kube", cfg.MaxCreating, cfg.MaxAlive, b.pool)
	if err := b.ensurePolicy(pctx); err != nil {
		return nil, err
	}
	if err := b.takeLease(pctx); err != nil {
		return nil, err
	}
	if n, err := Reap(ctx, cs, cfg.Namespace, b.log); err != nil {
		b.log.Warn("reap leftovers", "err", err)
	} else if n > 0 {
		b.log.Info("reaped pods of dead rollcage processes", "removed", n)
	}
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stop = stop
	b.loopDone.Add(2)
	go func() { defer b.loopDone.Done(); b.renewLease(lctx) }()
	go func() { defer b.loopDone.Done(); b.pool.Refill(lctx, b.log, b.warmOne) }()
	return b, nil
}

// apiErr maps a client error to the sandbox sentinels, saying what to do.
func apiErr(op, host string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("kube: %s: forbidden: bind the Role of deploy/kubernetes/rollcage-role.yaml to rollcage's identity: %w", op, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kube: %s: not found: create it (scripts/kube-up.sh does for its cluster): %w", op, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("kube: %s: unauthorized at %s: check the kubeconfig's credentials: %w", op, host, err)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return fmt.Errorf("kube: %s: %w", op, err)
	}
	return fmt.Errorf("kube: %s: no API server answers at %s: start one (scripts/kube-up.sh) or fix --kubeconfig: %w: %v", op, host, sandbox.ErrUnavailable, err)
}

func (b *Backend) ensurePolicy(ctx context.Context) error {
	_, err := b.cs.NetworkingV1().NetworkPolicies(b.cfg.Namespace).Create(ctx, denyAllPolicy(b.cfg.Namespace), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return apiErr("network policy", b.rest.Host, err)
	}
	return nil
}

// Stats reports the backend's counters.
func (b *Backend) Stats() sandbox.Stats {
	creating, alive := b.slots.Counts()
	return sandbox.Stats{Creating: creating, Alive: alive, Warm: b.pool.Size()}
}

// Owner is the backend's owner id (LabelOwner of its pods).
func (b *Backend) Owner() string { return b.owner }

// Namespace is where the backend's pods run.
func (b *Backend) Namespace() string { return b.cfg.Namespace }

// Clientset is the backend's API client (tests read pods with it).
func (b *Backend) Clientset() kubernetes.Interface { return b.cs }

// Create starts a sandbox for spec: a warm pod when the pool has one that
// fits, else a new one once admission allows.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := b.slots.CheckOpen("create"); err != nil {
		return nil, err
	}
	if spec.User == sandbox.UserRoot {
		return nil, fmt.Errorf("kubernetes: create %s: root sandboxes need pods with hostUsers: false (a user namespace per pod), which this backend does not create: use --backend docker on an engine with --userns-remap: %w", spec.EpisodeID, sandbox.ErrUnsupported)
	}
	spec, err := b.resolveSpec(spec)
	if err != nil {
		return nil, err
	}
	log := b.log.With("episode_id", spec.EpisodeID)
	if b.poolable(spec) {
		if p := b.takeWarm(ctx, spec, log); p != nil {
			return p, nil
		}
	}
	if err := b.slots.AcquireAlive(ctx, spec.EpisodeID); err != nil {
		return nil, err
	}
	p, err := b.start(ctx, spec, false)
	if err != nil {
		b.slots.ReleaseAlive()
		return nil, err
	}
	if err := p.configure(ctx, spec); err != nil {
		p.Close(ctx)
		return nil, err
	}
	log.Info("sandbox created", "pod", p.name)
	return p, nil
}

func (b *Backend) resolveSpec(spec sandbox.Spec) (sandbox.Spec, error) {
	spec, err := hostside.ResolveSpec(spec, b.cfg.DefaultLimits, b.cfg.Lease)
	if err != nil {
		return spec, fmt.Errorf("kube: create: %w", err)
	}
	return spec, nil
}

// poolable: a warm pod was made with the backend's limits and lease and
// no egress; its labels can be changed at hand-out.
func (b *Backend) poolable(spec sandbox.Spec) bool {
	return spec.Network == sandbox.NetworkNone && spec.Lease == b.cfg.Lease && spec.Limits == b.cfg.DefaultLimits
}

// start creates a pod for spec inside the admission bound, waits for it to
// run and connects to its agent. The caller holds an alive slot.
func (b *Backend) start(ctx context.Context, spec sandbox.Spec, warm bool) (*pod, error) {
	release, err := b.slots.Admit(ctx, spec.EpisodeID)
	if err != nil {
		return nil, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout)
	defer cancel()
	token := randomToken()
	labels := make(map[string]string, len(spec.Labels)+4)
	for k, v := range spec.Labels {
		labels[k] = labelValue(v)
	}
	labels[LabelManaged] = "true"
	labels[LabelOwner] = b.owner
	name := podName(spec.EpisodeID, token)
	episode := spec.EpisodeID
	if warm {
		labels[LabelPool] = "true"
		labels[LabelEpisode] = ""
		name, episode = "rollcage-pool-"+token, ""
	} else {
		labels[LabelEpisode] = labelValue(spec.EpisodeID)
	}
	manifest := podFor(podParams{
		Name: name, Namespace: b.cfg.Namespace, Node: b.cfg.Node,
		Image: spec.Image, AgentImage: b.cfg.AgentImage, PullPolicy: corev1.PullPolicy(b.cfg.PullPolicy),
		Labels: labels, Episode: episode, Limits: spec.Limits, Requests: b.cfg.Requests,
		Lease: spec.Lease, Workdir: spec.Workdir, Proxy: spec.Network == sandbox.NetworkProxy,
	})
	p := newPod(b, name, spec.Image, b.log.With("episode_id", spec.EpisodeID, "pod", name))
	p.disk = spec.Limits.DiskBytes
	created, err := b.cs.CoreV1().Pods(b.cfg.Namespace).Create(ctx, manifest, metav1.CreateOptions{})
	if err != nil {
		return nil, apiErr("create pod "+name, b.rest.Host, err)
	}
	if err := b.waitRunning(ctx, created); err != nil {
		p.teardown(ctx)
		return nil, err
	}
	conn, err := b.attach(name)
	if err != nil {
		p.teardown(ctx)
		return nil, err
	}
	p.Use(conn, spec.Lease, p.log, p.gone)
	if _, err := p.Agent().Ping(ctx); err != nil {
		p.teardown(ctx)
		return nil, fmt.Errorf("kube: start %s: agent did not answer over attach: %w: %v; last logs: %s", name, sandbox.ErrAgent, err, b.lastLogs(name))
	}
	if spec.Network == sandbox.NetworkProxy {
		// Before the episode is configured, so no sandboxed process runs
		// yet that could bind the relay's socket first.
		sock := spec.ProxySocket
		tun, err := p.Agent().Tunnel(ctx, proxyTunnel, func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		})
		if err != nil {
			p.teardown(ctx)
			return nil, fmt.Errorf("kube: start %s: egress tunnel: %w", name, err)
		}
		p.tunnel = tun
	}
	if err := b.slots.Add(p, spec.EpisodeID); err != nil {
		p.teardown(ctx)
		return nil, err
	}
	return p, nil
}

// warmOne starts a warm pod of image for the pool, when a slot under
// MaxAlive is free.
func (b *Backend) warmOne(ctx context.Context, image string) (*pod, error) {
	if !b.slots.TryAlive() {
		return nil, hostside.ErrNoSlot
	}
	p, err := b.start(ctx, sandbox.Spec{
		Image: image, Workdir: hostside.DefaultWorkdir, Network: sandbox.NetworkNone,
		Limits: b.cfg.DefaultLimits, Lease: b.cfg.Lease,
	}, true)
	if err != nil {
		b.slots.ReleaseAlive()
		return nil, err
	}
	return p, nil
}

// Close stops the pool and the Lease renewal, closes every sandbox of the
// backend and deletes its Lease. Idempotent.
func (b *Backend) Close(ctx context.Context) error {
	if !b.slots.MarkClosed() {
		return nil
	}
	b.stop()
	b.loopDone.Wait()
	return errors.Join(b.slots.CloseAll(ctx), b.dropLease(ctx))
}
