package kube

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/rollcage/rollcage/sandbox"
)

// waitRunning watches p until its sandbox container runs, and fails at
// once with what the kubelet said when it never will.
func (b *Backend) waitRunning(ctx context.Context, p *corev1.Pod) error {
	for {
		done, err := b.podState(p)
		if done || err != nil {
			return err
		}
		w, err := b.cs.CoreV1().Pods(b.cfg.Namespace).Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", p.Name).String(),
			ResourceVersion: p.ResourceVersion,
		})
		if err != nil {
			return b.startErr(ctx, p.Name, err)
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Deleted:
				w.Stop()
				return fmt.Errorf("kube: start %s: pod deleted while starting: %w", p.Name, sandbox.ErrClosed)
			case watch.Error:
				continue // the watch ends; it is restarted below
			}
			if np, ok := ev.Object.(*corev1.Pod); ok {
				p = np
				if done, err := b.podState(p); done || err != nil {
					w.Stop()
					return err
				}
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return b.startErr(ctx, p.Name, ctx.Err())
		}
		// The watch closed (a timeout or a too-old version): read the pod
		// again and go on.
		np, err := b.cs.CoreV1().Pods(b.cfg.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return b.startErr(ctx, p.Name, err)
		}
		p = np
	}
}

func (b *Backend) startErr(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("kube: start %s: pod not running within %v (or cancelled): %w; last logs: %s", name, b.cfg.StartTimeout, ctx.Err(), b.lastLogs(name))
	}
	return apiErr("start "+name, b.rest.Host, err)
}

// podState: true when the sandbox container runs; an error when the pod
// ended or a container is stuck for a reason no wait cures.
func (b *Backend) podState(p *corev1.Pod) (bool, error) {
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return false, fmt.Errorf("kube: start %s: pod %s before its agent answered (%s): %w; last logs: %s", p.Name, p.Status.Phase, p.Status.Reason+" "+p.Status.Message, sandbox.ErrAgent, b.lastLogs(p.Name))
	}
	all := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range all {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName":
				img := cs.Image
				return false, fmt.Errorf("kube: start %s: image %s is not on the node (%s): import it (KUBE_IMAGES=%s scripts/kube-up.sh) or set a pull policy: %w", p.Name, img, w.Reason, img, sandbox.ErrImageMissing)
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff":
				return false, fmt.Errorf("kube: start %s: container %s: %s: %s: %w", p.Name, cs.Name, w.Reason, w.Message, sandbox.ErrAgent)
			}
		}
		if t := cs.State.Terminated; t != nil && cs.Name == containerName {
			return false, fmt.Errorf("kube: start %s: agent exited with code %d (%s) before it answered: %w; last logs: %s", p.Name, t.ExitCode, t.Reason, sandbox.ErrAgent, b.lastLogs(p.Name))
		}
		if cs.Name == containerName && cs.State.Running != nil {
			return true, nil
		}
	}
	return false, nil
}

// lastLogs returns the sandbox container's last log lines on one line.
func (b *Backend) lastLogs(name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	tail := int64(10)
	rc, err := b.cs.CoreV1().Pods(b.cfg.Namespace).GetLogs(name, &corev1.PodLogOptions{Container: containerName, TailLines: &tail}).Stream(ctx)
	if err != nil {
		return "(logs unavailable: " + err.Error() + ")"
	}
	defer rc.Close()
	data, _ := io.ReadAll(io.LimitReader(rc, 16<<10))
	s := strings.TrimSpace(string(data))
	if s == "" {
		return "(none)"
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}
