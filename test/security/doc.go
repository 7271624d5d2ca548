// Package security holds the attacks of a hostile tenant (and of a compromised pool host)
// on anvil's boundaries, each written as the attack and run against a real kube-apiserver
// with the shipped roles and admission policies, acting with the attacker's identity
// through impersonation. docs/security.md lists them with the boundary each one proves.
package security
