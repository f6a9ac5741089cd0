package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Owner leases: each Backend holds one Lease, renewed every leaseRenew;
// one not renewed for leaseSeconds marks its owner dead.
const (
	leasePrefix  = "rollcage-owner-"
	leaseSeconds = 30
	leaseRenew   = 10 * time.Second
)

func newOwnerID() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b[:])
}

func holderIdentity() string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid())
}

func (b *Backend) takeLease(ctx context.Context) error {
	now := metav1.NewMicroTime(time.Now())
	d := int32(leaseSeconds)
	holder := holderIdentity()
	_, err := b.cs.CoordinationV1().Leases(b.cfg.Namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leasePrefix + b.owner, Labels: map[string]string{LabelManaged: "true", LabelOwner: b.owner}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &holder, LeaseDurationSeconds: &d, AcquireTime: &now, RenewTime: &now,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return apiErr("owner lease", b.rest.Host, err)
	}
	return nil
}

// renewLease renews the owner Lease until ctx ends. A failed renewal is
// retried at the next tick; pods are reaped only once the Lease is a full
// duration old.
func (b *Backend) renewLease(ctx context.Context) {
	t := time.NewTicker(leaseRenew)
	defer t.Stop()
	leases := b.cs.CoordinationV1().Leases(b.cfg.Namespace)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, leaseRenew)
		l, err := leases.Get(rctx, leasePrefix+b.owner, metav1.GetOptions{})
		if err == nil {
			now := metav1.NewMicroTime(time.Now())
			l.Spec.RenewTime = &now
			_, err = leases.Update(rctx, l, metav1.UpdateOptions{})
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			b.log.Warn("renew owner lease", "lease", leasePrefix+b.owner, "err", err)
		}
	}
}

func (b *Backend) dropLease(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	err := b.cs.CoordinationV1().Leases(b.cfg.Namespace).Delete(ctx, leasePrefix+b.owner, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return apiErr("delete owner lease", b.rest.Host, err)
	}
	return nil
}

// leaseExpired: the Lease was not renewed within its duration.
func leaseExpired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// liveOwners sorts leases into the owners alive and the expired leases.
func liveOwners(leases []coordinationv1.Lease, now time.Time) (map[string]bool, []coordinationv1.Lease) {
	alive := map[string]bool{}
	var dead []coordinationv1.Lease
	for _, l := range leases {
		if leaseExpired(&l, now) {
			dead = append(dead, l)
		} else {
			alive[l.Labels[LabelOwner]] = true
		}
	}
	return alive, dead
}

// Reap deletes, in namespace, the rollcage pods whose owner's Lease is
// gone or expired, and those expired Leases. It returns how many pods it
// deleted.
func Reap(ctx context.Context, cs kubernetes.Interface, namespace string, log *slog.Logger) (int, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelManaged + "=true"})
	if err != nil {
		return 0, fmt.Errorf("kube: reap: list pods: %w", err)
	}
	leases, err := cs.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelManaged + "=true"})
	if err != nil {
		return 0, fmt.Errorf("kube: reap: list leases: %w", err)
	}
	alive, dead := liveOwners(leases.Items, time.Now())
	n := 0
	var errs []error
	grace := int64(0)
	for _, p := range pods.Items {
		if alive[p.Labels[LabelOwner]] {
			continue
		}
		err := cs.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		switch {
		case err == nil:
			n++
			log.Info("reaped pod of a dead rollcage process", "pod", p.Name, "owner", p.Labels[LabelOwner], "phase", p.Status.Phase)
		case apierrors.IsNotFound(err):
		default:
			errs = append(errs, fmt.Errorf("delete pod %s: %w", p.Name, err))
		}
	}
	for _, l := range dead {
		if err := cs.CoordinationV1().Leases(namespace).Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete lease %s: %w", l.Name, err))
		}
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("kube: reap: %w", errors.Join(errs...))
	}
	return n, nil
}

// RemoveEpisode deletes the pods of one episode (found by its label and
// annotation) whose owner's Lease is gone or expired: what a gateway that
// restarted calls for each episode it ended as abandoned. Pods of a live
// owner (this backend, or another rollcage still running the episode) are
// left alone. It returns how many it deleted.
func (b *Backend) RemoveEpisode(ctx context.Context, episodeID string) (int, error) {
	if episodeID == "" {
		return 0, errors.New("kube: remove episode: empty episode id")
	}
	ns := b.cfg.Namespace
	pods, err := b.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: LabelManaged + "=true," + LabelEpisode + "=" + labelValue(episodeID),
	})
	if err != nil {
		return 0, apiErr("remove episode "+episodeID+": list pods", b.rest.Host, err)
	}
	leases, err := b.cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelManaged + "=true"})
	if err != nil {
		return 0, apiErr("remove episode "+episodeID+": list leases", b.rest.Host, err)
	}
	alive, _ := liveOwners(leases.Items, time.Now())
	n := 0
	var errs []error
	grace := int64(0)
	for _, p := range pods.Items {
		// The label is the id reduced; the annotation is the id as given.
		if p.Annotations[AnnotationEpisode] != episodeID || alive[p.Labels[LabelOwner]] {
			continue
		}
		err := b.cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		switch {
		case err == nil:
			n++
			b.log.Info("deleted pod of an abandoned episode", "episode_id", episodeID, "pod", p.Name)
		case apierrors.IsNotFound(err):
		default:
			errs = append(errs, apiErr("remove episode "+episodeID+": delete pod "+p.Name, b.rest.Host, err))
		}
	}
	return n, errors.Join(errs...)
}
