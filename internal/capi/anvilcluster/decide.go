package anvilcluster

import (
	"cmp"
	"slices"

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
}

// Plan is what to write for an AnvilCluster.
type Plan struct {
	// Endpoint is written into spec.controlPlaneEndpoint; nil leaves it alone. It is set only
	// while the spec has none, so it is written once.
	Endpoint *clusterv1.APIEndpoint
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
