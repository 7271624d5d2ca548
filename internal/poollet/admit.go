package poollet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/networkaccess"
	"github.com/anvil-dev/anvil/internal/scheduler"
)

// admits checks again, before a runtime machine is created, what the scheduler checked
// when it bound the Machine: the pool's tenant policy and taints (scheduler.Admits, the
// same filters). A Machine bound without the scheduler, or before the pool's policy
// changed, is handed back with a condition saying why, not created.
func (r *MachineReconciler) admits(ctx context.Context, m *computev1alpha1.Machine) (*metav1.Condition, error) {
	mp := &computev1alpha1.MachinePool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.Pool}, mp); err != nil {
		return nil, fmt.Errorf("reading MachinePool %s: %w", r.Pool, err)
	}
	pool := scheduler.Pool{Name: mp.Name, Taints: mp.Spec.Taints, Tenants: scheduler.TenantsFrom(mp.Spec.Tenants)}
	req := scheduler.Request{Namespace: m.Namespace, Tolerations: m.Spec.Tolerations}
	if pool.Tenants.NeedsLabels() {
		ns := &corev1.Namespace{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Name: m.Namespace}, ns); err != nil {
			return nil, fmt.Errorf("reading namespace %s: %w", m.Namespace, err)
		}
		req.NamespaceLabels = ns.Labels
	}
	if x := scheduler.Admits(&pool, &req); x.Code != scheduler.ReasonNone {
		return &metav1.Condition{Type: computev1alpha1.ConditionScheduled, Status: metav1.ConditionFalse,
			Reason:  computev1alpha1.ReasonRuntimeRefused,
			Message: fmt.Sprintf("MachinePool %s does not admit the machine: %s", r.Pool, x)}, nil
	}
	return nil, nil
}

// admitsNetworks refuses a Machine with a NIC on a network its namespace may not join
// (networkaccess.Check): the pool's spec.networks against what the runtime gives each
// network now, asked of the runtime rather than read from status.networks, which lags it.
// The scheduler does not check networks, so this is where a tenant's NIC on the builders'
// network or another tenant's is stopped; the Machine goes back to the scheduler.
func (r *MachineReconciler) admitsNetworks(ctx context.Context, m *computev1alpha1.Machine, nics []*mriv1alpha1.NetworkInterface) (*metav1.Condition, error) {
	if len(nics) == 0 {
		return nil, nil
	}
	mp := &computev1alpha1.MachinePool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.Pool}, mp); err != nil {
		return nil, fmt.Errorf("reading MachinePool %s: %w", r.Pool, err)
	}
	rs, err := r.Runtime.Status(ctx, &mriv1alpha1.StatusRequest{})
	if err != nil {
		return nil, fmt.Errorf("asking the runtime for its networks: %w", err)
	}
	pool := networkaccess.PoolFrom(mp.Name, mp.Spec.Networks, networksFromMRI(rs.GetNetworks()))
	networks := make([]string, 0, len(nics))
	for _, n := range nics {
		networks = append(networks, n.GetNetwork())
	}
	j := networkaccess.Joiner{Namespace: m.Namespace, Builder: m.Labels[computev1alpha1.LabelImageBuilder] == "true"}
	if pool.NeedsLabels(networks) {
		ns := &corev1.Namespace{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Name: m.Namespace}, ns); err != nil {
			return nil, fmt.Errorf("reading namespace %s: %w", m.Namespace, err)
		}
		j.NamespaceLabels = ns.Labels
	}
	if x := networkaccess.Check(pool, &j, networks); x.Code != networkaccess.CodeNone {
		return &metav1.Condition{Type: computev1alpha1.ConditionScheduled, Status: metav1.ConditionFalse,
			Reason:  computev1alpha1.ReasonRuntimeRefused,
			Message: fmt.Sprintf("MachinePool %s does not admit the machine: %s", r.Pool, x)}, nil
	}
	return nil, nil
}
