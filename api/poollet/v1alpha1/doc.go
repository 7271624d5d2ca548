// Package poolletv1alpha1 is the poollet's console service (console.proto), generated code
// committed: how the console server reaches a Machine's console through its pool.
package poolletv1alpha1
