package capi

import (
	"context"
	"errors"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/anvilmachine"
	"github.com/anvil-dev/anvil/internal/capi/identity"
)

// endpointRecheck is how often a running control-plane machine's endpoint is dialled while
// its cluster's control plane is not initialized: no watch says when it starts answering.
const endpointRecheck = 30 * time.Second

// DefaultEndpointGrace is how long a control-plane machine runs before an endpoint that
// accepts nothing is called unreachable: a kubeadm API server on real hardware answers
// within minutes.
const DefaultEndpointGrace = 10 * time.Minute

// reachability sets am's ControlPlaneEndpointReachable condition as
// anvilmachine.EndpointCondition decides, dialling the cluster's endpoint (TCP, nothing
// sent) when anvilmachine.EndpointAddress says to, with the dialer of identity kubeconfigs
// (the endpoint is the tenant's to choose too: no loopback unless allowed, no link-local or
// cloud metadata address), and says how soon to look again (0: no dial is due). am's Ready
// condition must already be this reconcile's.
func (r *AnvilMachineReconciler) reachability(ctx context.Context, am *infrav1.AnvilMachine, machine *clusterv1.Machine, cluster *clusterv1.Cluster) time.Duration {
	in := anvilmachine.EndpointInput{Grace: r.EndpointGrace, Now: time.Now()}
	if machine != nil {
		_, in.ControlPlane = machine.Labels[clusterv1.MachineControlPlaneLabel]
	}
	if cluster != nil {
		in.Endpoint = cluster.Spec.ControlPlaneEndpoint
		in.Initialized = cluster.Status.Initialization.ControlPlaneInitialized != nil && *cluster.Status.Initialization.ControlPlaneInitialized
	}
	if ready := apimeta.FindStatusCondition(am.Status.Conditions, infrav1.ConditionReady); ready != nil &&
		ready.Status == metav1.ConditionTrue && ready.Reason == infrav1.ReasonRunning {
		in.RunningSince = ready.LastTransitionTime.Time
	}
	addr, dial := anvilmachine.EndpointAddress(in)
	accepted := false
	if dial {
		var refused *identity.AddressError
		conn, err := dialer(r.Computes.AllowLoopback)(ctx, "tcp", addr)
		switch {
		case errors.As(err, &refused):
			// An address no tenant's name may make the provider dial (loopback, link-local,
			// cloud metadata): nothing is said of it, and it is not asked again.
			apimeta.RemoveStatusCondition(&am.Status.Conditions, infrav1.ConditionControlPlaneEndpointReachable)
			return 0
		case err == nil:
			accepted = true
			_ = conn.Close()
		}
	}
	c := anvilmachine.EndpointCondition(in, accepted)
	if c == nil {
		apimeta.RemoveStatusCondition(&am.Status.Conditions, infrav1.ConditionControlPlaneEndpointReachable)
		return 0
	}
	apimeta.SetStatusCondition(&am.Status.Conditions, withGeneration(*c, am.Generation))
	if dial {
		return endpointRecheck
	}
	return 0
}
