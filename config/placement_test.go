package config

import (
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const hypervisorLabel = "node-restriction.kubernetes.io/anvil-hypervisor"

// keepsOffHypervisors reports whether every term of o's required node affinity excludes
// nodes carrying the hypervisor label (a single term without it would let the Pod there).
func keepsOffHypervisors(o *unstructured.Unstructured) bool {
	terms, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "affinity", "nodeAffinity",
		"requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
	if len(terms) == 0 {
		return false
	}
	for _, term := range terms {
		exprs, _, _ := unstructured.NestedSlice(term.(map[string]any), "matchExpressions")
		excluded := false
		for _, e := range exprs {
			m := e.(map[string]any)
			if m["key"] == hypervisorLabel && m["operator"] == "DoesNotExist" {
				excluded = true
			}
		}
		if !excluded {
			return false
		}
	}
	return true
}

// The attack: a guest that escapes QEMU is root on its hypervisor node (the qemu runtime's
// Pod is privileged); the manager, the Cluster API provider or the metal site scheduled
// there would hand it the cluster's and the BMCs' credentials. The rendered manifests keep
// every Deployment off nodes labelled as hypervisors, the hypervisor DaemonSets tolerate the
// hypervisors' taint, and each namespace carries the Pod Security level its Pods need.
func TestControlPlaneStaysOffHypervisorNodes(t *testing.T) {
	kubectl := tool(t, "kubectl")
	namespaces := map[string]string{}
	found := map[string]bool{}
	for _, dir := range []string{"default", "metal-site", "capi"} {
		for _, o := range kustomize(t, kubectl, dir) {
			switch {
			case o.GetKind() == "Namespace":
				namespaces[o.GetName()] = o.GetLabels()["pod-security.kubernetes.io/enforce"]
			case o.GetKind() == "Deployment":
				found[o.GetName()] = true
				if !keepsOffHypervisors(o) {
					t.Errorf("config/%s: Deployment %s may be scheduled onto a hypervisor node: it needs a required node affinity with %s DoesNotExist", dir, o.GetName(), hypervisorLabel)
				}
			case o.GetKind() == "DaemonSet":
				tols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "tolerations")
				tolerated := false
				for _, tol := range tols {
					m := tol.(map[string]any)
					tolerated = tolerated || (m["key"] == hypervisorLabel && m["operator"] == "Exists" && m["effect"] == "NoSchedule")
				}
				if !tolerated {
					t.Errorf("config/%s: DaemonSet %s does not tolerate the hypervisors' taint %s:NoSchedule", dir, o.GetName(), hypervisorLabel)
				}
			}
		}
	}
	for _, d := range []string{"anvil-controller-manager", "anvil-metal-site", "anvil-capi-provider"} {
		if !found[d] {
			t.Errorf("Deployment %s was not rendered", d)
		}
	}
	for ns, want := range map[string]string{"anvil-system": "privileged", "anvil-pool-leases": "restricted", "anvil-metal": "privileged"} {
		if got := namespaces[ns]; got != want {
			t.Errorf("namespace %s: pod-security.kubernetes.io/enforce is %q, want %q", ns, got, want)
		}
	}
}

// A single-node overlay (one node is everything: an evaluation, the install test) lets
// the manager and the site onto the hypervisor node, and only those two.
func TestSingleNodeOverlayDropsOnlyTheAffinity(t *testing.T) {
	kubectl := tool(t, "kubectl")
	dir := filepath.Join(t.TempDir(), "single")
	var bases []string
	for _, b := range []string{"default", "metal-site"} {
		abs, err := filepath.Abs(b)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, abs)
	}
	o := Overlay{Bases: bases, Images: map[string]string{"anvil": "r/anvil:v1", "anvil-qemu": "r/anvil-qemu:v1", "anvil-metal": "r/anvil-metal:v1"}, SingleNode: true}
	if err := o.Write(dir); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, obj := range kustomize(t, kubectl, dir) {
		if obj.GetKind() != "Deployment" {
			continue
		}
		seen++
		if _, found, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec", "affinity"); found {
			t.Errorf("single node: Deployment %s still has an affinity", obj.GetName())
		}
		if sel, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "spec", "nodeSelector"); obj.GetName() == "anvil-metal-site" && sel["node-restriction.kubernetes.io/anvil-metal-site"] != "metal" {
			t.Errorf("single node: the site's node selector %v was lost", sel)
		}
	}
	if seen != 2 {
		t.Errorf("%d Deployments rendered, want the manager and the site", seen)
	}
}
