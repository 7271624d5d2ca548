// Package identity decides whether an AnvilCluster's identityRef kubeconfig may be used, and
// builds the client configuration from it by hand.
//
// The kubeconfig is the tenant's: whoever may create a Secret and an AnvilCluster writes it.
// So it is read as data, never loaded the way kubectl loads one: no file it names is read, no
// command it names runs, no proxy or impersonation it asks for is used. A field outside the
// allow-list is refused by name, and no refusal ever carries a value from the kubeconfig.
// The package also decides which addresses a remote control plane may have and which
// namespace pairs an admin allows. It must never do I/O: the controller resolves names and
// dials.
package identity
