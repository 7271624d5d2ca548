package poollet

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// renewEvery is how often the Lease is renewed: every interval, but at least three times a
// lease, so a long --interval never lets the pool's Lease lapse between two renewals (the
// scheduler would take a live pool for dead).
func renewEvery(interval, lease time.Duration) time.Duration {
	if lease > 0 && interval > lease/3 {
		return lease / 3
	}
	return interval
}

// heartbeat renews the pool's Lease every interval, so the scheduler knows the poollet
// is alive. It is a small write on its own object, not a pool status update.
type heartbeat struct {
	pool     string
	client   client.Client
	interval time.Duration
	duration time.Duration
}

func (h *heartbeat) Start(ctx context.Context) error {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		if err := h.renew(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "renewing the pool's Lease", "pool", h.pool)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (h *heartbeat) renew(ctx context.Context) error {
	now := metav1.NowMicro()
	l := &coordinationv1.Lease{}
	err := h.client.Get(ctx, client.ObjectKey{Namespace: computev1alpha1.PoolLeaseNamespace, Name: h.pool}, l)
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: computev1alpha1.PoolLeaseNamespace, Name: h.pool},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(h.pool),
				LeaseDurationSeconds: ptr.To(int32(h.duration.Seconds())), RenewTime: &now},
		}
		return h.client.Create(ctx, l)
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	l.Spec.LeaseDurationSeconds = ptr.To(int32(h.duration.Seconds()))
	l.Spec.HolderIdentity = ptr.To(h.pool)
	return h.client.Update(ctx, l)
}
