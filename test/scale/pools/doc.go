// Command pools measures Machines going from creation to Running on fake pools: 10,000
// Machines over 100 pools of the fake runtime (no latency) by default. It runs anvil's
// controller manager and all poollets (with their fake runtimes) as two child processes so
// each one's peak RSS can be read, counts the API writes to Machines from the apiserver's
// own request metrics, and prints one JSON object.
//
//	go run ./test/scale/pools -machines 10000 -pools 100
package main
