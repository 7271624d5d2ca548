// Package registrynet is how anvil connects to registries that tenants name in their
// images: an HTTP transport whose every wait is bounded (connect, TLS, each read), that
// never goes through a proxy, and that refuses loopback, link-local and private addresses
// unless an administrator allow-listed them. The address is checked on every connection,
// after the name is resolved, and the connection goes to the address checked, so a name
// that resolves to a public address at one moment and a private one the next (DNS
// rebinding) does not get through.
//
// It must never carry credentials of its own: authentication is the caller's choice.
package registrynet
