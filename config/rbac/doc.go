// Package rbac holds anvil's shipped roles (the YAML in this folder and below it, most of
// it generated from RBAC markers by make manifests) and installs them: the same files an
// operator applies, embedded so that anvil dev and the tests install what ships.
package rbac
