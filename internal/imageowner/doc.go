// Package imageowner decides which repositories of a registry shared by tenants (anvil's
// builders' registry, anvil dev's embedded one) a namespace may use: it publishes only
// into its own folder (REGISTRY/<namespace>/...), and it reads (an OSImage's base, a
// Machine's image) its own folder and the folders an admin shares with everyone (anvil/
// by default: the builder image, the test OS).
//
// It is pure: repository names and namespaces in, a reason out. It must never read a
// registry; the callers check before they make any request for a reference.
package imageowner
