// Package consoleapi is anvil's console server (docs/console.md): the aggregated API group
// subresources.compute.anvil.dev, whose machines/consolelog subresource reads a Machine's
// console log through kube-apiserver, with the caller's own credentials and rights.
//
// A request comes from kube-apiserver (its front-proxy client certificate, the user in
// X-Remote-* headers) or straight from a client with a bearer token; either way the user is
// authenticated the way kube-apiserver vouches for them and authorized again here with a
// SubjectAccessReview, since this server can be reached without kube-apiserver. The
// Machine's console is then read through its pool's poollet (api/poollet/v1alpha1), which
// checks this server's own token against machinepools/proxy.
package consoleapi

// Group and Version are the aggregated API's.
const (
	Group   = "subresources.compute.anvil.dev"
	Version = "v1alpha1"
)
