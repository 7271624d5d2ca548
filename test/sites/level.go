package sites

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// MachinePool reads the level's pool.
func (l *Level) MachinePool(ctx context.Context) (*computev1alpha1.MachinePool, error) {
	p := &computev1alpha1.MachinePool{}
	return p, l.Client.Get(ctx, client.ObjectKey{Name: l.Pool}, p)
}

// WaitPoolReady waits until the level's pool is Ready and offers Class (a broker pool
// offers it once the level below has room for one).
func (l *Level) WaitPoolReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		p, err := l.MachinePool(ctx)
		if err == nil && meta.IsStatusConditionTrue(p.Status.Conditions, computev1alpha1.ConditionReady) {
			for _, c := range p.Status.SupportedClasses {
				if c == Class {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("level %s: MachinePool %s not Ready with class %s after %s (last error: %v)", l.Name, l.Pool, Class, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Machines lists the level's Machines in namespace.
func (l *Level) Machines(ctx context.Context, namespace string) ([]computev1alpha1.Machine, error) {
	list := &computev1alpha1.MachineList{}
	if err := l.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	return list.Items, nil
}
