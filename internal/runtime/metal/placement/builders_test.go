package placement

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

const infra = "infra"

type hostOpt func(*metalv1alpha1.Host)

// host is a free amd64 Host of 8 cpus and 16 GiB.
func host(name string, opts ...hostOpt) *metalv1alpha1.Host {
	h := &metalv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: infra},
		Spec:       metalv1alpha1.HostSpec{Architecture: computev1alpha1.ArchitectureAMD64},
		Status: metalv1alpha1.HostStatus{
			ProvisioningState: metalv1alpha1.StateAvailable, OperationalStatus: metalv1alpha1.OperationalOK,
			Hardware: &metalv1alpha1.HardwareSummary{CPUs: 8, MemoryMiB: 16 << 10},
		},
	}
	for _, o := range opts {
		o(h)
	}
	return h
}

func arch(a computev1alpha1.Architecture) hostOpt {
	return func(h *metalv1alpha1.Host) { h.Spec.Architecture = a }
}

func size(cpus int32, mib int64) hostOpt {
	return func(h *metalv1alpha1.Host) {
		h.Status.Hardware = &metalv1alpha1.HardwareSummary{CPUs: cpus, MemoryMiB: mib}
	}
}

func noHardware(h *metalv1alpha1.Host) { h.Status.Hardware = nil }

func bmc(address string) hostOpt {
	return func(h *metalv1alpha1.Host) { h.Spec.BMC.Address = address }
}

func labelled(kv ...string) hostOpt {
	return func(h *metalv1alpha1.Host) {
		h.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Labels[kv[i]] = kv[i+1]
		}
	}
}

func heldBy(name string) hostOpt {
	return func(h *metalv1alpha1.Host) {
		h.Spec.ConsumerRef = &metalv1alpha1.ConsumerReference{Namespace: "tenant", Name: name, UID: "uid-" + name}
	}
}

func inState(s metalv1alpha1.ProvisioningState) hostOpt {
	return func(h *metalv1alpha1.Host) { h.Status.ProvisioningState = s }
}

func operational(s metalv1alpha1.OperationalStatus) hostOpt {
	return func(h *metalv1alpha1.Host) { h.Status.OperationalStatus = s }
}

func detached(h *metalv1alpha1.Host) { h.Spec.Detached = true }

func deleting(h *metalv1alpha1.Host) {
	now := metav1.Now()
	h.DeletionTimestamp = &now
}

// policy allows namespaces (by name) to use the Hosts hostSel selects (nil: all).
func policy(hostSel map[string]string, namespaces ...string) *metalv1alpha1.HostPolicy {
	p := &metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: infra},
		Spec: metalv1alpha1.HostPolicySpec{Namespaces: namespaces}}
	if hostSel != nil {
		p.Spec.HostSelector = &metav1.LabelSelector{MatchLabels: hostSel}
	}
	return p
}

// policyBySelector allows namespaces whose labels match nsSel.
func policyBySelector(nsSel *metav1.LabelSelector) *metalv1alpha1.HostPolicy {
	return &metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: infra},
		Spec: metalv1alpha1.HostPolicySpec{NamespaceSelector: nsSel}}
}

// small asks for 2 cpus and 4 GiB of amd64 from namespace tenant.
func small() Request {
	return Request{Architecture: computev1alpha1.ArchitectureAMD64, MilliCPU: 2000, MemoryBytes: 4 << 30,
		Class: "small", Namespace: "tenant"}
}

func names(hosts []*metalv1alpha1.Host) []string {
	out := []string{}
	for _, h := range hosts {
		out = append(out, h.Name)
	}
	return out
}
