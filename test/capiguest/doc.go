// Package capiguest tests anvil's Cluster API provider on real VMs whose guests register
// their own Nodes: the real Cluster API manager (test/capienv) drives one Cluster whose
// Machines are anvil Machines on QEMU pools of two architectures (TCG), booting the node
// image (the test OS with anvil-node-agent, test/nodeagent/nodeimage); each guest's
// bootstrap script runs the agent against a workload control plane (internal/controlplane
// with kube-controller-manager) through its network's one forward, with a bootstrap token.
// Nothing here writes a Node: nodeRef and NodeHealthy come from the guests.
//
// The tests share one rig and one Cluster, each adding its own MachineDeployments, and need
// qemu-system-x86_64, qemu-system-aarch64, the test OS (make testos) and the assets of make
// tools; a missing one fails the package. Run it alone: it boots up to six TCG guests.
package capiguest
