// Package registry runs anvil's default OCI registry in-process: distribution v3 on a
// loopback port, storing in a folder (anvil dev) or in memory (tests). Any OCI registry
// works in a fleet; this one exists so a laptop or CI needs nothing else.
//
// It listens only on 127.0.0.1 and offers no authentication: it must never be exposed.
package registry
