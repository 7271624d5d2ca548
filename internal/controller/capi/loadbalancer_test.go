package capi

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/loadbalancer"
	"github.com/anvil-dev/anvil/internal/netswitch"
	"github.com/anvil-dev/anvil/test/harness"
)

// serveLoadBalancers runs the LoadBalancer controller against env with a switch of its own,
// as anvil dev does beside its QEMU pools: network anvil-nodes is 10.200.0.0/24.
func serveLoadBalancers(t *testing.T, env *harness.Env) {
	t.Helper()
	sw, err := netswitch.New(filepath.Join(t.TempDir(), "sw"), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sw.Close() })
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: new(true)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	first := uint16(harness.FreePort(t))
	r := &loadbalancer.Reconciler{Client: mgr.GetClient(),
		Server: loadbalancer.NewServer(ctx, netip.MustParseAddr("127.0.0.1"), sw, logr.Discard()),
		Segments: map[string]loadbalancer.Segment{"anvil-nodes": {Subnet: netip.MustParsePrefix("10.200.0.0/24"),
			Gateway: netip.MustParseAddr("10.200.0.1"), Name: func(ns string) string { return "seg-" + ns }}},
		Ports: loadbalancer.Ports{First: first, Last: first + 4}, Events: events.New(mgr.GetEventRecorder("loadbalancer"), nil)}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	harness.RunManager(t, mgr)
}

// An AnvilCluster asking for a control-plane load balancer gets a LoadBalancer (owned by it,
// selecting its control-plane machines) and takes its endpoint; its control-plane machine's
// anvil Machine carries the label the LoadBalancer selects and the node-local proxy's
// metadata. A LoadBalancer of the AnvilCluster's name that the provider did not make is left
// alone, and its endpoint is never taken.
func TestControlPlaneLoadBalancerGivesTheEndpoint(t *testing.T) {
	env := startProvider(t)
	serveLoadBalancers(t, env)
	c, ctx := env.Client, context.Background()
	ns := namespace(t, c, "lb-tenant")

	ac := newLoadBalancedCluster(t, c, ns, "prod")
	lb := &computev1alpha1.LoadBalancer{}
	eventually(t, "the AnvilCluster's endpoint from its LoadBalancer", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ac), ac); err != nil {
			return err
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "prod"}, lb); err != nil {
			return err
		}
		if lb.Status.Endpoint == nil || ac.Spec.ControlPlaneEndpoint.Host == "" || ac.Status.ControlPlaneLoadBalancer == nil {
			return fmt.Errorf("AnvilCluster endpoint %+v status %+v; LoadBalancer status %+v", ac.Spec.ControlPlaneEndpoint, ac.Status.ControlPlaneLoadBalancer, lb.Status)
		}
		return nil
	})
	if ac.Spec.ControlPlaneEndpoint.Host != "127.0.0.1" || ac.Spec.ControlPlaneEndpoint.Port != lb.Status.Endpoint.Port {
		t.Errorf("endpoint %+v, want the LoadBalancer's %+v", ac.Spec.ControlPlaneEndpoint, *lb.Status.Endpoint)
	}
	if seg := ac.Status.ControlPlaneLoadBalancer.SegmentEndpoint; seg.Host != "10.200.0.1" || seg.Port != lb.Status.Endpoint.Port {
		t.Errorf("status.controlPlaneLoadBalancer.segmentEndpoint %+v, want the gateway at the endpoint's port", seg)
	}
	if lb.Spec.Network != "anvil-nodes" || lb.Spec.Port != 6443 || len(lb.OwnerReferences) != 1 || lb.OwnerReferences[0].UID != ac.UID ||
		lb.Spec.Selector[clusterv1.ClusterNameLabel] != "prod" {
		t.Errorf("LoadBalancer spec %+v owners %+v", lb.Spec, lb.OwnerReferences)
	}
	awaitReady(t, c, ac, infrav1.ReasonProvisioned, 30*time.Second)

	// A control-plane machine: its anvil Machine is what the LoadBalancer selects, and it
	// boots with the proxy's metadata.
	if err := c.Create(ctx, bootstrapData(ns, "prod", "prod-cp-0-data")); err != nil {
		t.Fatal(err)
	}
	newMachineLabelled(t, c, ns, "prod", "prod-cp-0", "prod-cp-0-data", map[string]string{clusterv1.MachineControlPlaneLabel: ""})
	anvil := &computev1alpha1.Machine{}
	eventually(t, "the control plane's anvil Machine", func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "prod-cp-0"}, anvil)
	})
	want := map[string]string{
		infrav1.MetaDataControlPlaneEndpoint: fmt.Sprintf("127.0.0.1:%d", lb.Status.Endpoint.Port),
		infrav1.MetaDataControlPlaneForward:  fmt.Sprintf("10.200.0.1:%d", lb.Status.Endpoint.Port),
	}
	for k, v := range want {
		if anvil.Spec.MetaData[k] != v {
			t.Errorf("anvil Machine metaData[%s] = %q, want %q (all: %v)", k, anvil.Spec.MetaData[k], v, anvil.Spec.MetaData)
		}
	}
	for k, v := range lb.Spec.Selector {
		if got, ok := anvil.Labels[k]; !ok || got != v {
			t.Errorf("the control plane's anvil Machine labels %v do not match the LoadBalancer's selector %v", anvil.Labels, lb.Spec.Selector)
		}
	}

	// A tenant's own LoadBalancer at the name of another cluster's, made first.
	squat := &computev1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
		Spec: computev1alpha1.LoadBalancerSpec{Network: "anvil-nodes", Selector: map[string]string{"app": "mine"}, Port: 6443}}
	if err := c.Create(ctx, squat); err != nil {
		t.Fatal(err)
	}
	other := newLoadBalancedCluster(t, c, ns, "other")
	msg := awaitReady(t, c, other, infrav1.ReasonLoadBalancerNameTaken, 30*time.Second)
	if !strings.Contains(msg, "LoadBalancer "+ns+"/other") {
		t.Errorf("LoadBalancerNameTaken says %q; want it to name the LoadBalancer", msg)
	}
	time.Sleep(2 * time.Second) // the squatter's LoadBalancer has its endpoint by now
	if err := c.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
		t.Fatal(err)
	}
	if other.Spec.ControlPlaneEndpoint.Host != "" {
		t.Errorf("the AnvilCluster took the endpoint %+v of a LoadBalancer it did not make", other.Spec.ControlPlaneEndpoint)
	}
}

// newLoadBalancedCluster makes a Cluster and its AnvilCluster asking for a control-plane
// load balancer on anvil-nodes, without an endpoint.
func newLoadBalancedCluster(t *testing.T, c client.Client, ns, name string) *infrav1.AnvilCluster {
	t.Helper()
	return newClusterWith(t, c, ns, name, infrav1.AnvilClusterSpec{ControlPlaneLoadBalancer: &infrav1.ControlPlaneLoadBalancer{Network: "anvil-nodes"}})
}

// eventually retries check for up to 30 s.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = check(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}
