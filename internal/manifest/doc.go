// Package manifest reads Kubernetes YAML manifests (multi-document streams, folders of
// them) into objects, and creates them in a cluster when they are missing.
//
// It never overwrites an object that exists: manifests it applies are seeds, and the
// cluster's copy, possibly edited by a user since, wins.
package manifest
