// Package manifest reads Kubernetes YAML manifests (multi-document streams, folders of
// them) into objects and writes them to a cluster, in one of two ways:
//
//   - CreateMissing never overwrites an object that exists: the manifests are seeds (the
//     demo's samples, say), and the cluster's copy, possibly edited by a user since, wins;
//   - Apply replaces what exists: for objects anvil ships (CRDs, webhook configurations,
//     roles), so that a new version replaces the old one.
package manifest
