// Package registry runs anvil's default OCI registry in-process: distribution v3 on a
// loopback port, storing in a folder (anvil dev) or in memory (tests). Any OCI registry
// works in a fleet; this one exists so a laptop or CI needs nothing else.
//
// It listens only on 127.0.0.1. Given an Auth, it takes writes only from the holder of
// the push credential, or, to one repository, from a scoped credential (ScopedPush: what
// one build's builders get). With a read credential too (Auth.Read: the pools'), reading
// needs a credential, and a scoped one reads only the repositories it names; without one,
// reads are open to anyone who reaches it. It must never accept a write a scoped
// credential names outside its repository, nor a read outside its repositories.
package registry
