package placement

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// Covers reports whether the policy covers the Host: its hostSelector is empty or
// matches the Host's labels. A selector that does not parse covers nothing, so a typo
// never opens Hosts to tenants.
func Covers(p *metalv1alpha1.HostPolicy, h *metalv1alpha1.Host) bool {
	if p.Spec.HostSelector == nil {
		return true
	}
	return selects(p.Spec.HostSelector, h.Labels)
}

// Allows reports whether the policy lets the namespace use the Hosts it covers: by name,
// or by its namespaceSelector matching the namespace's labels. A nil namespaceSelector
// allows no namespace by label; an empty one allows every namespace.
func Allows(p *metalv1alpha1.HostPolicy, namespace string, namespaceLabels map[string]string) bool {
	for _, n := range p.Spec.Namespaces {
		if n == namespace {
			return true
		}
	}
	return p.Spec.NamespaceSelector != nil && selects(p.Spec.NamespaceSelector, namespaceLabels)
}

// Permitted reports whether any policy covering the Host allows the namespace.
func Permitted(h *metalv1alpha1.Host, policies []*metalv1alpha1.HostPolicy, namespace string, namespaceLabels map[string]string) bool {
	for _, p := range policies {
		if Covers(p, h) && Allows(p, namespace, namespaceLabels) {
			return true
		}
	}
	return false
}

// Offered reports whether any policy covers the Host: a Host no policy covers is given to
// no tenant, so it is not part of the pool.
func Offered(h *metalv1alpha1.Host, policies []*metalv1alpha1.HostPolicy) bool {
	for _, p := range policies {
		if Covers(p, h) {
			return true
		}
	}
	return false
}

func selects(sel *metav1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(set))
}
