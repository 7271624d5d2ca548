package anvilmachine

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// BootstrapGroup is the API group of Cluster API's bootstrap providers' config kinds
// (KubeadmConfig, TalosConfig, ...); some providers use a subgroup of it.
const BootstrapGroup = "bootstrap.cluster.x-k8s.io"

// CheckBootstrapOwner says why a Machine of cluster clusterName must not boot Secret s (nil
// when it may): s must be what a bootstrap provider writes for the cluster, labelled
// cluster.x-k8s.io/cluster-name=<cluster> and owned by a config of a bootstrap provider, or
// a Secret its writer labelled infrastructure.cluster.x-k8s.io/anvil-bootstrap-data=<cluster>
// (no bootstrap provider). Otherwise whoever may create a Machine could boot, and so read from inside the guest, any
// Secret of the namespace: the cluster's admin kubeconfig (<cluster>-kubeconfig, which
// carries the label and a value key), another cluster's bootstrap data.
func CheckBootstrapOwner(s *corev1.Secret, clusterName string) error {
	if s.Labels[clusterv1.ClusterNameLabel] != clusterName {
		return fmt.Errorf("bootstrap data Secret %s/%s is not labelled %s=%s: only a bootstrap provider's Secret for this cluster is booted",
			s.Namespace, s.Name, clusterv1.ClusterNameLabel, clusterName)
	}
	if s.Labels[infrav1.LabelBootstrapData] == clusterName {
		return nil
	}
	for _, ref := range s.OwnerReferences {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && (gv.Group == BootstrapGroup || strings.HasSuffix(gv.Group, "."+BootstrapGroup)) {
			return nil
		}
	}
	return fmt.Errorf("bootstrap data Secret %s/%s has no owner reference to a bootstrap provider's config (group %s) and no label %s=%s: only bootstrap data written for this cluster is booted",
		s.Namespace, s.Name, BootstrapGroup, infrav1.LabelBootstrapData, clusterName)
}

// secretOurs says whether s, at the name of am's first-boot Secret, was made by the provider
// for am: it carries the labels the provider writes and, when it lives beside am (local),
// an owner reference to am. A Secret of that name made by anyone else (Cluster API's
// <cluster>-kubeconfig, an unrelated one) is never written.
func secretOurs(s *corev1.Secret, am *infrav1.AnvilMachine, clusterName string, local bool) bool {
	if s.Labels[infrav1.AnvilMachineLabel] != am.Name || s.Labels[clusterv1.ClusterNameLabel] != clusterName {
		return false
	}
	if !local {
		return true // no owner reference reaches across control planes
	}
	for _, ref := range s.OwnerReferences {
		if ref.UID == am.UID {
			return true
		}
	}
	return false
}

// ownerRef is am as the owner of its first-boot Secret: not a controller, and not blocking
// deletion (which would need rights on the AnvilMachine's finalizers).
func ownerRef(am *infrav1.AnvilMachine) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: infrav1.GroupVersion.String(), Kind: "AnvilMachine", Name: am.Name, UID: am.UID}
}
