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

// EndpointAddress is the host:port to dial for in, and whether to dial at all: only for a
// running control-plane machine whose cluster has an endpoint and whose control plane is
// not initialized yet. Cluster API itself reaches the endpoint after that.
func EndpointAddress(in EndpointInput) (string, bool) {
	if !in.ControlPlane || in.RunningSince.IsZero() || in.Initialized || !in.Endpoint.IsValid() {
		return "", false
	}
	return net.JoinHostPort(in.Endpoint.Host, strconv.Itoa(int(in.Endpoint.Port))), true
}

// EndpointCondition is the machine's ControlPlaneEndpointReachable condition, given whether
// a TCP connection to EndpointAddress was accepted (when it was dialled); nil for a machine
// that has none (not a running control-plane machine, or a cluster without an endpoint).
// The message never carries the dial's error: the endpoint is the tenant's to choose, and
// refused, timed out and unreachable would tell a tenant more of the management cluster's
// network than whether Cluster API can reach the endpoint.
func EndpointCondition(in EndpointInput, accepted bool) *metav1.Condition {
	if !in.ControlPlane || in.RunningSince.IsZero() || !in.Endpoint.IsValid() {
		return nil
	}
	at := net.JoinHostPort(in.Endpoint.Host, strconv.Itoa(int(in.Endpoint.Port)))
	cond := func(status metav1.ConditionStatus, reason, msg string) *metav1.Condition {
		return &metav1.Condition{Type: infrav1.ConditionControlPlaneEndpointReachable, Status: status, Reason: reason, Message: msg}
	}
	running := in.Now.Sub(in.RunningSince).Round(time.Second)
	switch {
	case in.Initialized:
		return cond(metav1.ConditionTrue, infrav1.ReasonControlPlaneInitialized,
			fmt.Sprintf("Cluster API reached the API server at %s and initialized the control plane", at))
	case accepted:
		return cond(metav1.ConditionTrue, infrav1.ReasonEndpointAccepts,
			fmt.Sprintf("the control-plane endpoint %s accepts connections from the management cluster", at))
	case running < in.Grace:
		return cond(metav1.ConditionUnknown, infrav1.ReasonWaitingForAPIServer,
			fmt.Sprintf("the control-plane endpoint %s accepts no connection from the management cluster yet; this machine has run %s (its API server may still be starting; unreachable after %s)", at, running, in.Grace))
	}
	return cond(metav1.ConditionFalse, infrav1.ReasonEndpointUnreachable,
		fmt.Sprintf("the control-plane endpoint %s accepts no connection from the management cluster %s after this control-plane machine started: Cluster API reaches its API server only there, and waits until it can; check the address and port (a VIP or load balancer in front of this machine's port 6443)", at, running))
}
