package anvilmachine

import (
	"fmt"
	"net"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// EndpointInput is what the controller knows of a machine for its
// ControlPlaneEndpointReachable condition.
type EndpointInput struct {
	// ControlPlane: the Cluster API Machine carries the control-plane label.
	ControlPlane bool
	// RunningSince is when the AnvilMachine's Ready condition became True (its anvil Machine
	// runs); zero while it does not run.
	RunningSince time.Time
	// Initialized is the Cluster's status.initialization.controlPlaneInitialized.
	Initialized bool
	// Endpoint is the Cluster's spec.controlPlaneEndpoint.
	Endpoint clusterv1.APIEndpoint
	// Grace is how long after the machine starts an endpoint that accepts nothing is still
	// taken for an API server starting (an emulated one takes over ten minutes).
	Grace time.Duration
	Now   time.Time
}

// eligible says whether the machine has the condition at all: a running control-plane
// machine of a cluster with an endpoint.
func (in EndpointInput) eligible() bool {
	return in.ControlPlane && !in.RunningSince.IsZero() && in.Endpoint.IsValid()
}

func (in EndpointInput) address() string {
	return net.JoinHostPort(in.Endpoint.Host, strconv.Itoa(int(in.Endpoint.Port)))
}

// EndpointAddress is the host:port to dial for in, and whether to dial at all: only for a
// running control-plane machine whose cluster has an endpoint and whose control plane is
// not initialized yet. Cluster API itself reaches the endpoint after that.
func EndpointAddress(in EndpointInput) (string, bool) {
	if !in.eligible() || in.Initialized {
		return "", false
	}
	return in.address(), true
}

// EndpointCondition is the machine's ControlPlaneEndpointReachable condition, given whether
// a TCP connection to EndpointAddress was accepted (when it was dialled); nil for a machine
// that has none (not a running control-plane machine, or a cluster without an endpoint).
// The message never carries the dial's error: the endpoint is the tenant's to choose, and
// refused, timed out and unreachable would tell a tenant more of the management cluster's
// network than whether Cluster API can reach the endpoint. Nor does it carry Now: the same
// finding every recheck is the same condition, and no status write.
func EndpointCondition(in EndpointInput, accepted bool) *metav1.Condition {
	if !in.eligible() {
		return nil
	}
	at := in.address()
	cond := func(status metav1.ConditionStatus, reason, msg string) *metav1.Condition {
		return &metav1.Condition{Type: infrav1.ConditionControlPlaneEndpointReachable, Status: status, Reason: reason, Message: msg}
	}
	deadline := in.RunningSince.Add(in.Grace).UTC().Format(time.RFC3339)
	switch {
	case in.Initialized:
		return cond(metav1.ConditionTrue, infrav1.ReasonControlPlaneInitialized,
			fmt.Sprintf("Cluster API reached the API server at %s and initialized the control plane", at))
	case accepted:
		return cond(metav1.ConditionTrue, infrav1.ReasonEndpointAccepts,
			fmt.Sprintf("the control-plane endpoint %s accepts connections from the management cluster", at))
	case in.Now.Sub(in.RunningSince) < in.Grace:
		return cond(metav1.ConditionUnknown, infrav1.ReasonWaitingForAPIServer,
			fmt.Sprintf("the control-plane endpoint %s accepts no connection from the management cluster yet; this machine's API server may still be starting (called unreachable from %s)", at, deadline))
	}
	return cond(metav1.ConditionFalse, infrav1.ReasonEndpointUnreachable,
		fmt.Sprintf("the control-plane endpoint %s has accepted no connection from the management cluster since %s (%s after this control-plane machine started): Cluster API reaches its API server only there, and waits until it can; check the address and port (a VIP or load balancer in front of this machine's port 6443)", at, deadline, in.Grace))
}
