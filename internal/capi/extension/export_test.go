package extension

import "github.com/anvil-dev/anvil/test/harness"

// For the external test package (extension_test), which runs anvil's manager: a package
// that imports this one.

// Env is the package's control plane.
func Env() *harness.Env { return env }
