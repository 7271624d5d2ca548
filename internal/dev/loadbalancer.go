package dev

import (
	"context"
	"net/netip"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/loadbalancer"
	"github.com/anvil-dev/anvil/internal/netswitch"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
)

// LoadBalancerHost is where anvil dev's LoadBalancers listen on the host: loopback, the one
// address that needs nothing added to the host and that the nodes can listen at too.
var LoadBalancerHost = netip.MustParseAddr("127.0.0.1")

// serveLoadBalancers serves the LoadBalancers of NodeNetwork in this process, which owns
// the QEMU pools' switch (docs/loadbalancer.md), with mgr's client, until ctx ends.
func serveLoadBalancers(ctx context.Context, mgr ctrl.Manager, sw *netswitch.Switch) error {
	seg := qemu.Segment{Subnet: NodeSubnet}
	r := &loadbalancer.Reconciler{
		Client: mgr.GetClient(),
		Server: loadbalancer.NewServer(ctx, LoadBalancerHost, sw, ctrl.Log.WithName("loadbalancer")),
		Segments: map[string]loadbalancer.Segment{NodeNetwork: {
			Subnet: NodeSubnet, Gateway: seg.Gateway(),
			Name: func(namespace string) string { return qemu.SegmentName(namespace, NodeNetwork) },
		}},
		Ports:  loadbalancer.DefaultPorts,
		Events: events.New(mgr.GetEventRecorder("loadbalancer"), nil),
	}
	return r.SetupWithManager(mgr)
}
