package anvilcluster

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

func anvilCluster(mut ...func(*infrav1.AnvilCluster)) *infrav1.AnvilCluster {
	ac := &infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "tenant"}}
	for _, f := range mut {
		f(ac)
	}
	return ac
}

func cpMachine(name string, age time.Duration, addrs ...clusterv1.MachineAddress) clusterv1.Machine {
	return clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))},
		Status:     clusterv1.MachineStatus{Addresses: addrs},
	}
}

func ip(t clusterv1.MachineAddressType, a string) clusterv1.MachineAddress {
	return clusterv1.MachineAddress{Type: t, Address: a}
}

func TestDecide(t *testing.T) {
	owner := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "tenant"}}
	given := func(ac *infrav1.AnvilCluster) {
		ac.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 6443}
	}
	deleting := cpMachine("old-deleting", 3*time.Hour, ip(clusterv1.MachineInternalIP, "10.0.0.9"))
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1e9, 0)}
	zones := []map[string]string{
		{infrav1.DefaultFailureDomainLabel: "b"}, {infrav1.DefaultFailureDomainLabel: "a"},
		{infrav1.DefaultFailureDomainLabel: "b"}, {"other": "x"}, {infrav1.DefaultFailureDomainLabel: ""},
	}
	for _, tc := range []struct {
		name      string
		in        Input
		reason    string
		ready     bool
		provision bool
		endpoint  *clusterv1.APIEndpoint
		fdNames   []string
	}{
		{name: "waits for its owner", in: Input{AnvilCluster: anvilCluster()}, reason: infrav1.ReasonWaitingForOwner},
		{name: "an unusable identity is not provisioned", in: Input{AnvilCluster: anvilCluster(), Cluster: owner, IdentityErr: errors.New("no key value")},
			reason: infrav1.ReasonIdentityUnusable},
		{name: "given endpoint", in: Input{AnvilCluster: anvilCluster(given), Cluster: owner}, reason: infrav1.ReasonProvisioned, ready: true, provision: true},
		{name: "no endpoint yet: provisioned so that machines are made", in: Input{AnvilCluster: anvilCluster(), Cluster: owner},
			reason: infrav1.ReasonWaitingForControlPlaneEndpoint, ready: true, provision: true},
		{name: "endpoint from the oldest control-plane machine with an address, internal first",
			in: Input{AnvilCluster: anvilCluster(), Cluster: owner, ControlPlaneMachines: []clusterv1.Machine{
				cpMachine("young", time.Minute, ip(clusterv1.MachineInternalIP, "10.0.0.2")),
				deleting,
				cpMachine("no-address", 2*time.Hour),
				cpMachine("old", time.Hour, ip(clusterv1.MachineHostName, "old"), ip(clusterv1.MachineExternalIP, "198.51.100.1"), ip(clusterv1.MachineInternalIP, "10.0.0.1")),
			}},
			reason: infrav1.ReasonProvisioned, ready: true, provision: true, endpoint: &clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}},
		{name: "a given endpoint is never replaced", in: Input{AnvilCluster: anvilCluster(given), Cluster: owner, ControlPlaneMachines: []clusterv1.Machine{
			cpMachine("m", time.Minute, ip(clusterv1.MachineInternalIP, "10.0.0.2"))}},
			reason: infrav1.ReasonProvisioned, ready: true, provision: true},
		{name: "failure domains from the pools' zone label", in: Input{AnvilCluster: anvilCluster(given), Cluster: owner, PoolLabels: zones},
			reason: infrav1.ReasonProvisioned, ready: true, provision: true, fdNames: []string{"a", "b"}},
		{name: "failure domains from another label", in: Input{AnvilCluster: anvilCluster(given, func(ac *infrav1.AnvilCluster) { ac.Spec.FailureDomainLabel = "other" }), Cluster: owner, PoolLabels: zones},
			reason: infrav1.ReasonProvisioned, ready: true, provision: true, fdNames: []string{"x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.in)
			if p.Ready.Reason != tc.reason || (p.Ready.Status == metav1.ConditionTrue) != tc.ready || p.Ready.Type != infrav1.ConditionReady {
				t.Errorf("Ready %s %s %q, want reason %s ready %v", p.Ready.Status, p.Ready.Reason, p.Ready.Message, tc.reason, tc.ready)
			}
			if !tc.ready && p.Ready.Message == "" {
				t.Error("a Ready condition that is not True must say why")
			}
			if p.Provisioned != tc.provision {
				t.Errorf("provisioned %v, want %v", p.Provisioned, tc.provision)
			}
			if !reflect.DeepEqual(p.Endpoint, tc.endpoint) {
				t.Errorf("endpoint %v, want %v", p.Endpoint, tc.endpoint)
			}
			var names []string
			for _, fd := range p.FailureDomains {
				names = append(names, fd.Name)
				if fd.ControlPlane == nil || !*fd.ControlPlane {
					t.Errorf("failure domain %s does not take control-plane machines", fd.Name)
				}
			}
			if !reflect.DeepEqual(names, tc.fdNames) {
				t.Errorf("failure domains %v, want %v", names, tc.fdNames)
			}
		})
	}
}

// Once provisioned, an AnvilCluster stays provisioned even if its identity breaks: Cluster
// API never un-provisions infrastructure, and the Ready condition says what broke.
func TestProvisionedIsNeverTakenBack(t *testing.T) {
	ac := anvilCluster(func(ac *infrav1.AnvilCluster) { ac.Status.Initialization.Provisioned = new(true) })
	for _, in := range []Input{{AnvilCluster: ac}, {AnvilCluster: ac, Cluster: &clusterv1.Cluster{}, IdentityErr: errors.New("x")}} {
		if p := Decide(in); !p.Provisioned || p.Ready.Status == metav1.ConditionTrue {
			t.Errorf("provisioned %v ready %s, want provisioned and not ready", p.Provisioned, p.Ready.Status)
		}
	}
}

func TestDecideLoadBalancer(t *testing.T) {
	owner := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: "tenant"}}
	withLB := func(ac *infrav1.AnvilCluster) {
		ac.Spec.ControlPlaneLoadBalancer = &infrav1.ControlPlaneLoadBalancer{Network: "anvil-nodes"}
	}
	ours := func(mut ...func(*computev1alpha1.LoadBalancer)) *computev1alpha1.LoadBalancer {
		lb := LoadBalancer(anvilCluster(withLB), "prod", "tenant", true)
		for _, f := range mut {
			f(lb)
		}
		return lb
	}
	reported := func(lb *computev1alpha1.LoadBalancer) {
		lb.Status.Endpoint = &computev1alpha1.Endpoint{Host: "127.0.0.1", Port: 16443}
		lb.Status.SegmentEndpoint = &computev1alpha1.Endpoint{Host: "10.200.0.1", Port: 16443}
	}
	exhausted := func(lb *computev1alpha1.LoadBalancer) {
		lb.Status.Conditions = []metav1.Condition{{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: computev1alpha1.ReasonPortsExhausted, Message: "no free port"}}
	}
	foreign := func(lb *computev1alpha1.LoadBalancer) { lb.Labels = map[string]string{"app": "mine"} }
	cpMachines := []clusterv1.Machine{cpMachine("cp-0", time.Hour, ip(clusterv1.MachineInternalIP, "10.200.0.2"))}

	for _, tc := range []struct {
		name     string
		in       Input
		reason   string
		ready    bool
		create   bool
		endpoint *clusterv1.APIEndpoint
		segment  string
	}{
		{name: "none yet: made, not ready (the control plane waits for the endpoint)",
			in: Input{AnvilCluster: anvilCluster(withLB), Cluster: owner, Namespace: "tenant", Local: true}, reason: infrav1.ReasonWaitingForLoadBalancer, create: true},
		{name: "made, no endpoint yet: its own reason carried; no machine address taken",
			in:     Input{AnvilCluster: anvilCluster(withLB), Cluster: owner, LoadBalancer: ours(exhausted), ControlPlaneMachines: cpMachines},
			reason: infrav1.ReasonWaitingForLoadBalancer},
		{name: "reported: the endpoint is the load balancer's",
			in:     Input{AnvilCluster: anvilCluster(withLB), Cluster: owner, LoadBalancer: ours(reported)},
			reason: infrav1.ReasonProvisioned, ready: true, endpoint: &clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 16443}, segment: "10.200.0.1:16443"},
		{name: "endpoint already set: kept, status still mirrored",
			in: Input{AnvilCluster: anvilCluster(withLB, func(ac *infrav1.AnvilCluster) {
				ac.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 16443}
			}), Cluster: owner, LoadBalancer: ours(reported)},
			reason: infrav1.ReasonProvisioned, ready: true, segment: "10.200.0.1:16443"},
		{name: "a LoadBalancer of the name not made for it: left alone",
			in: Input{AnvilCluster: anvilCluster(withLB), Cluster: owner, LoadBalancer: ours(reported, foreign)}, reason: infrav1.ReasonLoadBalancerNameTaken},
	} {
		p := Decide(tc.in)
		if p.Ready.Reason != tc.reason || (p.Ready.Status == metav1.ConditionTrue) != tc.ready || p.Ready.Message == "" && !tc.ready {
			t.Errorf("%s: Ready %s/%s %q, want reason %s ready %v", tc.name, p.Ready.Status, p.Ready.Reason, p.Ready.Message, tc.reason, tc.ready)
		}
		if !p.Provisioned {
			t.Errorf("%s: not provisioned: Cluster API must go on to make the control plane", tc.name)
		}
		if (p.CreateLoadBalancer != nil) != tc.create {
			t.Errorf("%s: create %v", tc.name, p.CreateLoadBalancer)
		}
		if !reflect.DeepEqual(p.Endpoint, tc.endpoint) {
			t.Errorf("%s: endpoint %+v, want %+v", tc.name, p.Endpoint, tc.endpoint)
		}
		var seg string
		if p.LoadBalancer != nil && p.LoadBalancer.SegmentEndpoint.IsValid() {
			seg = fmt.Sprintf("%s:%d", p.LoadBalancer.SegmentEndpoint.Host, p.LoadBalancer.SegmentEndpoint.Port)
		}
		if seg != tc.segment {
			t.Errorf("%s: segment endpoint %q, want %q", tc.name, seg, tc.segment)
		}
	}

	lb := LoadBalancer(anvilCluster(withLB), "prod", "elsewhere", false)
	if lb.Namespace != "elsewhere" || len(lb.OwnerReferences) != 0 || lb.Spec.Network != "anvil-nodes" || lb.Spec.Port != 6443 ||
		!reflect.DeepEqual(lb.Spec.Selector, map[string]string{clusterv1.ClusterNameLabel: "prod", clusterv1.MachineControlPlaneLabel: ""}) {
		t.Errorf("the LoadBalancer in another anvil: %+v", lb)
	}
	if local := LoadBalancer(anvilCluster(withLB), "prod", "tenant", true); len(local.OwnerReferences) != 1 || local.OwnerReferences[0].Kind != "AnvilCluster" {
		t.Errorf("a local LoadBalancer is not owned by its AnvilCluster: %+v", local.OwnerReferences)
	}
}
