// Package cluster runs a real one-node Kubernetes cluster on this machine for tests: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy (iptables mode),
// containerd with runc and the Debian CNI plugins, and a kubelet whose Node registers and
// goes Ready. Pods pull images from a registry on 127.0.0.1 (plain HTTP).
//
// The order of Start is a safety duty, not a detail: kube-proxy's rules for the kubernetes
// Service and the egress guard (guard.go) are in place before the kubelet starts, so no Pod
// on the Pod network ever sends a packet to a service IP that leaves the machine, nor to
// any address off it. hostNetwork Pods are host processes: the guard does not hold them
// (docs/cluster.md).
//
// It changes the host (docs/cluster.md lists what): before the first change it writes what
// it will change to SnapshotPath, and Stop puts every piece back and stops every process of
// the run, by PID checked against its command line, and every Pod's process, by cgroup. A
// Start after a run that was killed finds that snapshot and restores it first. One node runs
// per machine at a time (LockPath); it needs root.
//
// It must never bind a real external interface (the servers listen on loopback or on the
// node address, which lives on a bridge of its own with no ports), never let Pod traffic
// leave the machine, and never kill a process that is not of its run.
package cluster
