// Package anvilcluster decides what an AnvilCluster (Cluster API's infrastructure cluster on
// anvil) reports: whether its infrastructure is provisioned, its control plane endpoint, its
// failure domains and its Ready condition.
//
// It calls nothing and reads no clock: the AnvilCluster controller reads the objects, calls
// Decide and applies the plan. It must never do I/O.
package anvilcluster
