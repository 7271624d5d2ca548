// Command scheduling measures how fast anvil's scheduler binds Machines to MachinePools,
// and, in the same run on the same kube-apiserver, how fast kube-scheduler (built from the
// same Kubernetes release) binds Pods to Nodes created as plain API objects. It prints one
// JSON object; the figure to compare is the ratio of the two rates.
//
// Both sides get the same client QPS and burst, warm caches (a warm-up object is bound
// before the clock starts), and the same creator; the clock starts at the first create
// and stops when the last object is seen bound. Rounds alternate anvil, a plain patching
// client (the API write ceiling), kube-scheduler, and again.
//
//	go run ./test/scale/scheduling -machines 10000 -pools 1000
package main
