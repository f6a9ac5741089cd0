package kube

import (
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/internal/hostside"
)

// Labels and annotations rollcage puts on its pods.
const (
	LabelManaged = "rollcage.io/managed" // "true" on every sandbox pod
	LabelOwner   = "rollcage.io/owner"   // the owning Backend's id (its Lease's suffix)
	LabelEpisode = "rollcage.io/episode" // the episode id reduced to a label value; "" while warm
	LabelPool    = "rollcage.io/pool"    // "true" while the pod waits in the warm pool
	// AnnotationEpisode is the episode id as given.
	AnnotationEpisode = "rollcage.io/episode-id"
)

// Names inside the pod.
const (
	containerName = "sandbox"
	agentDir      = "/.rollcage"
	agentPath     = agentDir + "/rollcage-agent"
	sandboxUID    = 1000
	policyName    = "rollcage-sandboxes-deny-all"
	// proxyTunnel is the abstract socket, in the pod's network namespace,
	// that the agent's egress relay dials and the agent tunnels to the
	// host; the agent binds it before the episode's first command.
	proxyTunnel = "@rollcage-egress"
)

// capAdd are the capabilities the agent keeps (as with Docker): enough to
// switch to the sandbox user, chown what it copies in and kill its process
// groups. The sandbox user's commands lose them all at the uid change.
var capAdd = []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"}

// podParams is everything that decides a pod.
type podParams struct {
	Name       string
	Namespace  string
	Node       string
	Image      string
	AgentImage string
	PullPolicy corev1.PullPolicy
	Labels     map[string]string
	Episode    string
	Limits     sandbox.Limits
	Requests   Requests
	Lease      time.Duration
	Workdir    string
	Proxy      bool // the egress relay on 127.0.0.1:3128, tunnelled to the host
}

// podFor is the pure translation of podParams into a pod, kept free of I/O
// so its security-relevant output is golden-tested.
func podFor(p podParams) *corev1.Pod {
	no := false
	root := int64(0)
	grace := int64(0)
	limits := corev1.ResourceList{
		corev1.ResourceMemory:           *resource.NewQuantity(p.Limits.MemoryBytes, resource.BinarySI),
		corev1.ResourceCPU:              *resource.NewMilliQuantity(int64(p.Limits.CPUs*1000), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(p.Limits.DiskBytes, resource.BinarySI),
	}
	requests := corev1.ResourceList{
		corev1.ResourceMemory: *resource.NewQuantity(min(p.Requests.MemoryBytes, p.Limits.MemoryBytes), resource.BinarySI),
		corev1.ResourceCPU:    *resource.NewMilliQuantity(min(p.Requests.MilliCPU, int64(p.Limits.CPUs*1000)), resource.DecimalSI),
		// Without a request the limit counts as one: 10 GiB a pod filled
		// this node's 250 GB after 24 pods.
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(min(256<<20, p.Limits.DiskBytes), resource.BinarySI),
	}
	agentMount := func(ro bool) []corev1.VolumeMount {
		return []corev1.VolumeMount{{Name: "rollcage-agent", MountPath: agentDir, ReadOnly: ro}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        p.Name,
			Namespace:   p.Namespace,
			Labels:      maps.Clone(p.Labels),
			Annotations: map[string]string{AnnotationEpisode: p.Episode},
		},
		Spec: corev1.PodSpec{
			NodeName:                      p.Node,
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			DNSPolicy:                     corev1.DNSDefault,
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: []corev1.Volume{{
				Name: "rollcage-agent",
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					SizeLimit: resource.NewQuantity(64<<20, resource.BinarySI),
				}},
			}},
			InitContainers: []corev1.Container{{
				Name:            "install-agent",
				Image:           p.AgentImage,
				ImagePullPolicy: p.PullPolicy,
				Command:         []string{"/rollcage-agent", "install", agentPath},
				VolumeMounts:    agentMount(false),
				SecurityContext: &corev1.SecurityContext{
					RunAsUser:                &root,
					RunAsGroup:               &root,
					AllowPrivilegeEscalation: &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				Resources: corev1.ResourceRequirements{Limits: limits, Requests: requests},
			}},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           p.Image,
				ImagePullPolicy: p.PullPolicy,
				Command:         []string{agentPath},
				Args:            agentArgs(p),
				WorkingDir:      "/",
				// The agent protocol runs over stdin and stdout, attached
				// by the host; nothing listens inside the pod.
				Stdin:        true,
				StdinOnce:    false,
				TTY:          false,
				VolumeMounts: agentMount(true),
				SecurityContext: &corev1.SecurityContext{
					RunAsUser:                &root, // the agent only; commands run as sandboxUID
					RunAsGroup:               &root,
					RunAsNonRoot:             &no,
					Privileged:               &no,
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: capAdd},
				},
				Resources: corev1.ResourceRequirements{Limits: limits, Requests: requests},
			}},
			HostNetwork:           false,
			HostPID:               false,
			HostIPC:               false,
			ShareProcessNamespace: &no,
		},
	}
}

// agentArgs are the agent's flags: stdio, the sandbox user, and in proxy
// mode the relay, whose host side is an abstract socket in the pod the
// agent tunnels to the host over the attach stream.
func agentArgs(p podParams) []string {
	args := []string{
		"--stdio",
		"--user", fmt.Sprintf("%d:%d", sandboxUID, sandboxUID),
		"--workdir", p.Workdir,
		"--lease", p.Lease.String(),
		"--shell", "auto",
	}
	if p.Proxy {
		args = append(args, "--proxy-listen", hostside.ProxyListen, "--proxy-socket", proxyTunnel)
	}
	return args
}

// denyAllPolicy selects every rollcage pod of the namespace and allows no
// traffic either way.
func denyAllPolicy(namespace string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName, Namespace: namespace, Labels: map[string]string{LabelManaged: "true"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelManaged: "true"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// podName builds rollcage-<episode>-<token>, a valid DNS label.
func podName(episode, token string) string {
	ep := labelValue(strings.ToLower(episode))
	if len(ep) > 40 {
		ep = strings.Trim(ep[:40], "-._")
	}
	ep = strings.NewReplacer("_", "-", ".", "-").Replace(ep)
	if ep == "" {
		return "rollcage-" + token
	}
	return "rollcage-" + ep + "-" + token
}

// labelValue reduces s to a valid label value: at most 63 characters of
// [A-Za-z0-9_.-], starting and ending alphanumeric.
func labelValue(s string) string { return hostside.NameChars(s, 63) }

// randomToken is the same 8 hex digits the container backends put in names.
var randomToken = hostside.RandomToken
