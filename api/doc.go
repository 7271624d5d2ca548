// Package api gathers every anvil API group into one scheme, so clients, the controller
// manager and tests all decode the same kinds.
package api
