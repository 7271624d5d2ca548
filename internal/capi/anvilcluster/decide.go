package anvilcluster

import (
	"cmp"
	"fmt"
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/scheduler"
)

// DefaultAPIServerPort is the control plane endpoint's port when it is taken from a
// machine's address, which carries none.
const DefaultAPIServerPort = 6443

// Input is what the controller observed for one AnvilCluster that is not being deleted.
type Input struct {
	AnvilCluster *infrav1.AnvilCluster
	// Cluster is the owner Cluster API Cluster; nil until Cluster API sets the owner reference.
	Cluster *clusterv1.Cluster
	// PoolLabels are the labels of every MachinePool the cluster's machines may use.
	PoolLabels []map[string]string
	// ControlPlaneMachines are the cluster's control-plane Machines (Cluster API's, labelled
	// cluster.x-k8s.io/control-plane), in any order.
	ControlPlaneMachines []clusterv1.Machine
	// IdentityErr says why the anvil control plane of spec.identityRef cannot be reached or
	// used; nil when it can, or when there is no identityRef.
	IdentityErr error
	// Namespace is where the cluster's anvil Machines live (the AnvilCluster's own, or the
	// one its identity names in another anvil control plane), and its LoadBalancer.
	Namespace string
	// Local is true when that is this control plane: the LoadBalancer is then owned by the
	// AnvilCluster.
	Local bool
	// LoadBalancer is the LoadBalancer named like the AnvilCluster in Namespace; nil if none.
	LoadBalancer *computev1alpha1.LoadBalancer
}

// Plan is what to write for an AnvilCluster.
type Plan struct {
	// Endpoint is written into spec.controlPlaneEndpoint; nil leaves it alone. It is set only
	// while the spec has none, so it is written once.
	Endpoint *clusterv1.APIEndpoint
	// CreateLoadBalancer is the control-plane LoadBalancer to create; nil: none.
	CreateLoadBalancer *computev1alpha1.LoadBalancer
	// LoadBalancer is the AnvilCluster's status.controlPlaneLoadBalancer.
	LoadBalancer *infrav1.ControlPlaneLoadBalancerStatus
	// Provisioned, FailureDomains and Ready are the AnvilCluster's status.
	Provisioned    bool
	FailureDomains []clusterv1.FailureDomain
	Ready          metav1.Condition
}

// Decide plans an AnvilCluster's spec endpoint and status. anvil needs nothing made for a
// cluster as a whole, so its infrastructure is provisioned as soon as Cluster API owns it
// and the anvil it names can be used; the endpoint may come later, from the first
// control-plane machine with an address, and Cluster API picks it up then.
func Decide(in Input) Plan {
	ac := in.AnvilCluster
	p := Plan{Provisioned: ac.Status.Initialization.Provisioned != nil && *ac.Status.Initialization.Provisioned}
	switch {
	case in.Cluster == nil:
		p.Ready = condition(metav1.ConditionFalse, infrav1.ReasonWaitingForOwner, "waiting for Cluster API to set the owner Cluster")
		return p
	case in.IdentityErr != nil:
		p.Ready = condition(metav1.ConditionFalse, infrav1.ReasonIdentityUnusable, in.IdentityErr.Error())
		return p
	}
	p.Provisioned = true
	p.FailureDomains = FailureDomains(in.PoolLabels, failureDomainLabel(ac.Spec.FailureDomainLabel))
	if ac.Spec.ControlPlaneLoadBalancer != nil {
		return decideLoadBalancer(in, p)
	}
	if ac.Spec.ControlPlaneEndpoint.IsValid() {
		p.Ready = condition(metav1.ConditionTrue, infrav1.ReasonProvisioned, "")
		return p
	}
	if ep, ok := endpointOf(in.ControlPlaneMachines); ok {
		p.Endpoint = &ep
		p.Ready = condition(metav1.ConditionTrue, infrav1.ReasonProvisioned, "")
		return p
	}
	// Provisioned, so Cluster API creates the machines the endpoint will come from.
	p.Ready = condition(metav1.ConditionTrue, infrav1.ReasonWaitingForControlPlaneEndpoint,
		"no spec.controlPlaneEndpoint: it is taken from the first control-plane machine's address once it has one")
	return p
}

// decideLoadBalancer plans the cluster's control-plane LoadBalancer and takes the endpoint
// from it. Until it has one, Ready is False: Cluster API's control plane makes no machine
// before the Cluster has an endpoint, so nothing is lost waiting.
func decideLoadBalancer(in Input, p Plan) Plan {
	ac, lb := in.AnvilCluster, in.LoadBalancer
	switch {
	case lb == nil:
		p.CreateLoadBalancer = LoadBalancer(ac, in.Cluster.Name, in.Namespace, in.Local)
		p.Ready = condition(metav1.ConditionFalse, infrav1.ReasonWaitingForLoadBalancer,
			fmt.Sprintf("creating LoadBalancer %s/%s for the control-plane endpoint", in.Namespace, ac.Name))
		return p
	case lb.Labels[clusterv1.ClusterNameLabel] != in.Cluster.Name || lb.Labels[infrav1.AnvilClusterLabel] != ac.Name:
		p.Ready = condition(metav1.ConditionFalse, infrav1.ReasonLoadBalancerNameTaken,
			fmt.Sprintf("LoadBalancer %s/%s exists and was not made for this AnvilCluster (labels %s and %s); it is left alone: delete or rename it",
				lb.Namespace, lb.Name, clusterv1.ClusterNameLabel, infrav1.AnvilClusterLabel))
		return p
	}
	st := &infrav1.ControlPlaneLoadBalancerStatus{Name: lb.Name}
	if e := lb.Status.SegmentEndpoint; e != nil {
		st.SegmentEndpoint = clusterv1.APIEndpoint{Host: e.Host, Port: e.Port}
	}
	p.LoadBalancer = st
	e := lb.Status.Endpoint
	switch {
	case ac.Spec.ControlPlaneEndpoint.IsValid():
		p.Ready = condition(metav1.ConditionTrue, infrav1.ReasonProvisioned, "")
	case e == nil || lb.Status.SegmentEndpoint == nil:
		why := "it has not reported yet"
		if c := apimeta.FindStatusCondition(lb.Status.Conditions, computev1alpha1.ConditionReady); c != nil {
			why = fmt.Sprintf("%s: %s", c.Reason, c.Message)
		}
		p.Ready = condition(metav1.ConditionFalse, infrav1.ReasonWaitingForLoadBalancer,
			fmt.Sprintf("waiting for LoadBalancer %s/%s's endpoint (%s)", lb.Namespace, lb.Name, why))
	default:
		p.Endpoint = &clusterv1.APIEndpoint{Host: e.Host, Port: e.Port}
		p.Ready = condition(metav1.ConditionTrue, infrav1.ReasonProvisioned, "")
	}
	return p
}

// LoadBalancer is the control-plane LoadBalancer of AnvilCluster ac of cluster clusterName:
// named like it, in namespace, sending to the API server port of the cluster's
// control-plane machines on spec.controlPlaneLoadBalancer's network; owned by ac when local.
func LoadBalancer(ac *infrav1.AnvilCluster, clusterName, namespace string, local bool) *computev1alpha1.LoadBalancer {
	lb := &computev1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Name: ac.Name, Namespace: namespace,
			Labels: map[string]string{clusterv1.ClusterNameLabel: clusterName, infrav1.AnvilClusterLabel: ac.Name}},
		Spec: computev1alpha1.LoadBalancerSpec{
			Network:  ac.Spec.ControlPlaneLoadBalancer.Network,
			Selector: map[string]string{clusterv1.ClusterNameLabel: clusterName, clusterv1.MachineControlPlaneLabel: ""},
			Port:     DefaultAPIServerPort,
		},
	}
	if local {
		lb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ac, infrav1.GroupVersion.WithKind("AnvilCluster"))}
	}
	return lb
}

// FailureDomains are the distinct values of label on pools, sorted; every one may hold
// control-plane machines.
func FailureDomains(pools []map[string]string, label string) []clusterv1.FailureDomain {
	var names []string
	for _, l := range pools {
		if v, ok := l[label]; ok && v != "" && !slices.Contains(names, v) {
			names = append(names, v)
		}
	}
	slices.Sort(names)
	var out []clusterv1.FailureDomain
	for _, n := range names {
		out = append(out, clusterv1.FailureDomain{Name: n, ControlPlane: new(true)})
	}
	return out
}

// endpointOf is the endpoint of the oldest control-plane machine with an address (the first
// one made is the one the others join), preferring an internal IP, then an external one.
func endpointOf(machines []clusterv1.Machine) (clusterv1.APIEndpoint, bool) {
	sorted := slices.Clone(machines)
	slices.SortFunc(sorted, func(a, b clusterv1.Machine) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	for _, m := range sorted {
		if m.DeletionTimestamp != nil {
			continue
		}
		for _, t := range []clusterv1.MachineAddressType{clusterv1.MachineInternalIP, clusterv1.MachineExternalIP} {
			for _, a := range m.Status.Addresses {
				if a.Type == t && a.Address != "" {
					return clusterv1.APIEndpoint{Host: a.Address, Port: DefaultAPIServerPort}, true
				}
			}
		}
	}
	return clusterv1.APIEndpoint{}, false
}

func failureDomainLabel(l string) string {
	if l == "" {
		return infrav1.DefaultFailureDomainLabel
	}
	return l
}

func condition(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: infrav1.ConditionReady, Status: status, Reason: reason, Message: msg}
}

// UsablePoolLabels are the labels of the pools whose tenant policy lets namespace ns (with
// labels nsLabels) place Machines: the pools the cluster's machines may use. Failure domains
// come only from those, so an AnvilCluster does not list zones of pools its namespace may not
// use (nor tell its tenant they exist).
func UsablePoolLabels(pools []computev1alpha1.MachinePool, ns string, nsLabels map[string]string) []map[string]string {
	var out []map[string]string
	for _, p := range pools {
		if scheduler.TenantsFrom(p.Spec.Tenants).Allows(ns, labels.Set(nsLabels)) {
			out = append(out, p.Labels)
		}
	}
	return out
}
