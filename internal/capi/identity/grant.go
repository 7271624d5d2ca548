package identity

import "slices"

// Grant is one admin-owned AnvilClusterIdentity: AnvilClusters in the namespaces
// AllowedNamespaces may use identities whose context names RemoteNamespace.
type Grant struct {
	RemoteNamespace   string
	AllowedNamespaces []string
}

// NamespaceAllowed says whether an AnvilCluster in namespace local may make its anvil
// Machines in namespace remote of its identity's control plane: its own namespace always,
// another only when a grant names the pair. Without this a tenant's kubeconfig for this
// same apiserver could name another tenant's namespace.
func NamespaceAllowed(local, remote string, grants []Grant) bool {
	if local == remote {
		return true
	}
	for _, g := range grants {
		if g.RemoteNamespace == remote && slices.Contains(g.AllowedNamespaces, local) {
			return true
		}
	}
	return false
}
