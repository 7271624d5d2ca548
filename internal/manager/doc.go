// Package manager builds anvil's controller manager: one controller-runtime manager with
// every anvil controller registered, configured from flags (concurrency, API QPS and burst,
// resync period, metrics and health addresses, leader election).
//
// It wires controllers together and decides nothing itself; each controller lives in its
// own package under internal/controller.
package manager
