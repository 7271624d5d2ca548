// Command pools measures Machines going from creation to Running on fake pools: 10,000
// Machines over 100 pools of the fake runtime (no latency) by default. It runs anvil's
// controller manager and all poollets (with their fake runtimes) as two child processes so
// each one's peak RSS and CPU time can be read, counts the API writes to Machines from the
// apiserver's own request metrics, and prints one JSON object: also the slowest Machine
// (create → Running), each process's CPU (kube-apiserver and etcd included) idle and during
// the run, the apiserver's watchers, and the watch ends and relists of the scenario's own
// informer, the manager's and all poollets' (internal/watchstats, read from each process's
// metrics). A run that does not finish still prints what it saw, with "error".
//
//	go run ./test/scale/pools -machines 10000 -pools 100
package main
