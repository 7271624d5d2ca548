package capi

import (
	"context"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// AnvilMachineOf is the anvil Machine of am wherever its cluster's anvil Machines live
// (here, or in the anvil its AnvilCluster's identityRef names), read through the caches
// the controllers use; nil if there is none. The in-place update extension reports a
// reimage from it; it only reads.
func (cs *Computes) AnvilMachineOf(ctx context.Context, am *infrav1.AnvilMachine) (*computev1alpha1.Machine, error) {
	_, ac, err := clusterOf(ctx, cs.Local.Client, am.Namespace, am.Labels[clusterv1.ClusterNameLabel])
	if err != nil {
		return nil, err
	}
	compute, err := cs.For(ctx, ac)
	if err != nil {
		return nil, err
	}
	return anvilMachineOf(ctx, compute, am, compute.namespaceFor(am.Namespace))
}
