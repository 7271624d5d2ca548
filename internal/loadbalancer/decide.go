package loadbalancer

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// Ports is the range a load balancer's port is taken from, First to Last inclusive. The
// same port is the endpoint's on the host and the segment endpoint's at the gateway.
type Ports struct {
	First, Last uint16
}

// DefaultPorts are below Linux's ephemeral range (32768–60999), so no outgoing connection
// of the host holds one, and clear of 6443, the API server's own port on the nodes, where
// a node-local proxy listens at the endpoint's port beside it.
var DefaultPorts = Ports{First: 16443, Last: 16999}

// Valid says whether r is a range of ports.
func (r Ports) Valid() bool { return r.First > 0 && r.First <= r.Last }

// Candidates are the ports of r that are not in used, lowest first: the ones to try, in
// order, for a load balancer that has none yet (one a process outside anvil holds is
// skipped when its listen fails).
func (r Ports) Candidates(used map[uint16]bool) []uint16 {
	var out []uint16
	if !r.Valid() {
		return nil
	}
	for p := int(r.First); p <= int(r.Last); p++ {
		if !used[uint16(p)] {
			out = append(out, uint16(p))
		}
	}
	return out
}

// Backends are the addresses connections go to: each selected machine's InternalIP in
// subnet (its address on the segment; it has others on other networks) at port, for the
// machines running and not being deleted, ordered by address, each once.
func Backends(machines []computev1alpha1.Machine, subnet netip.Prefix, port uint16) []netip.AddrPort {
	var out []netip.AddrPort
	for _, m := range machines {
		if m.DeletionTimestamp != nil || m.Status.State != computev1alpha1.MachineStateRunning {
			continue
		}
		for _, a := range m.Status.Addresses {
			ip, err := netip.ParseAddr(a.Address)
			if a.Type != "InternalIP" || err != nil || !subnet.Contains(ip) {
				continue
			}
			ap := netip.AddrPortFrom(ip, port)
			if !slices.Contains(out, ap) {
				out = append(out, ap)
			}
			break // one address per machine: its segment NIC's
		}
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return cmp.Compare(a.Addr().Compare(b.Addr()), 0) })
	return out
}

// Observed is what the controller found out for one load balancer this reconcile.
type Observed struct {
	// Segment is whether spec.network is a segment network served here.
	Segment bool
	// Port is where it listens now; 0 when it could not listen.
	Port uint16
	// ListenErr says why the port recorded in the status cannot be listened at again, or
	// that no port of the range could be.
	ListenErr error
	// SegmentOpen is whether it listens at the segment's gateway too (a machine of the
	// namespace is on the segment).
	SegmentOpen bool
	Host        netip.Addr
	Gateway     netip.Addr
	Backends    []netip.AddrPort
}

// Status is the load balancer's status for what was observed. An endpoint once recorded
// stays, whatever happens later: clients (a cluster's certificates, kubeconfigs) name it.
func Status(lb *computev1alpha1.LoadBalancer, o Observed) computev1alpha1.LoadBalancerStatus {
	st := *lb.Status.DeepCopy()
	st.ObservedGeneration = lb.Generation
	st.Backends = nil
	for _, b := range o.Backends {
		st.Backends = append(st.Backends, b.String())
	}
	ready := metav1.Condition{Type: computev1alpha1.ConditionReady, ObservedGeneration: lb.Generation}
	switch {
	case !o.Segment:
		ready.Status, ready.Reason = metav1.ConditionFalse, computev1alpha1.ReasonNoSuchSegment
		ready.Message = fmt.Sprintf("network %s is not a segment network of the pools served here: name one their MachinePool status.networks[] lists with a segment", lb.Spec.Network)
	case o.Port == 0 && st.Endpoint != nil:
		ready.Status, ready.Reason = metav1.ConditionFalse, computev1alpha1.ReasonEndpointUnavailable
		ready.Message = fmt.Sprintf("cannot listen at %s:%d again (%v); the endpoint is kept since clients name it: free the port", st.Endpoint.Host, st.Endpoint.Port, o.ListenErr)
	case o.Port == 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, computev1alpha1.ReasonPortsExhausted
		ready.Message = fmt.Sprintf("no free port to listen at: %v", o.ListenErr)
	default:
		st.Endpoint = &computev1alpha1.Endpoint{Host: o.Host.String(), Port: int32(o.Port)}
		st.SegmentEndpoint = &computev1alpha1.Endpoint{Host: o.Gateway.String(), Port: int32(o.Port)}
		ready.Status, ready.Reason = metav1.ConditionTrue, computev1alpha1.ReasonServing
		switch {
		case !o.SegmentOpen:
			ready.Message = "listening on the host; the segment endpoint opens with the segment (once a machine of the namespace is on it)"
		case len(o.Backends) == 0:
			ready.Message = "listening; no selected machine is running with an address on the segment yet, so connections are closed"
		}
	}
	apimeta.SetStatusCondition(&st.Conditions, ready)
	return st
}
