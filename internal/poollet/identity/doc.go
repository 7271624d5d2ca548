// Package identity gives a poollet run by a DaemonSet its pool's own identity. All Pods of a
// DaemonSet share one ServiceAccount (anvil-system/anvil-node-poollet), but anvil's isolation
// rests on one identity per pool: the admission policy anvil-poollet-scope reads the pool
// from the user name anvil-system/poollet-<pool>, and secretaccess grants each pool's
// Secrets to that ServiceAccount alone. So the shared identity is used for two things only,
// both held to the Pod's own node by the admission policy anvil-node-poollet-scope (the
// node's name is in the Pod's bound token): making the ServiceAccount poollet-<node> and its
// bindings to the shipped poollet roles, and requesting short tokens of it bound to the Pod.
// The poollet then works as poollet-<node>, its pool named after its node.
//
// It never grants more than the shipped roles named anvil-poollet, and never keeps a token
// beyond the Pod it was bound to.
package identity
