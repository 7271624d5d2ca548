// Package sites builds a hierarchy of anvil control planes on loopback for tests and
// scale scenarios: each level is an API server (with anvil's CRDs and admission
// policies), its controller manager and one pool; the bottom level's pool is a fake
// runtime, every other level's a broker reaching the level below as that level's
// restricted broker identity (config/rbac/broker), as in a fleet of region, sites and
// hypervisors. anvil's processes run as child processes of the anvil binary built from
// this checkout. It never deletes what it did not start.
package sites
