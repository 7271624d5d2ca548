// Package devproc runs anvil as its users do, for the end-to-end test packages: the built
// `anvil` binary as `anvil dev` and as the separate processes of a fleet (runtimes,
// poollets, brokers), kubectl against them, and the free loopback ports they listen on.
//
// Every process it starts is tied to the test that started it: killed in its cleanup,
// and killed by the kernel if the test binary dies (Pdeathsig). The fleet's processes run
// under internal/controlplane's supervisor, as anvil dev's etcd and kube-apiserver do. It never skips a test: a
// missing binary fails it, naming the make target that builds it.
package devproc
