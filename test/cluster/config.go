package cluster

import (
	"fmt"
	"path/filepath"
)

// The node's configuration files, each written into Dir. Every listening socket is on
// loopback or the node address; every path a setting can move is moved into Dir.

// cniConfig is one bridge with host-local addresses from the Pod CIDR (its allocations in
// Dir) and no masquerading: nothing a Pod sends is meant to leave the machine.
func cniConfig(o Options, dir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "anvil-test-cluster",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`, CNIBridge, o.PodCIDR, filepath.Join(dir, "cni", "ipam"))
}

// containerdConfig is containerd 1.6's (config version 2) with everything under dir. The
// CRI settings are the ones this machine needs (docs/cluster.md): restrict_oom_score_adj
// (root lacks CAP_SYS_RESOURCE, so runc fails every sandbox without it), runtime_type
// repeated (declaring runc's options drops the built-in entry), cgroupfs (no systemd), and
// the pause image the run imports (no internet).
func containerdConfig(dir, socket string) string {
	d := func(p string) string { return filepath.Join(dir, "containerd", p) }
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
`, d("root"), d("state"), socket, d("opt"), PauseImage, filepath.Join(dir, "cni", "net.d"), d("runc"))
}

// kubeletConfig: the kubelet API on the node address (the apiserver's client certificate
// authenticates, RBAC authorizes), health and read-only ports off, cgroup v1 with cgroupfs,
// Pod logs in Dir, and eviction and image GC thresholds low enough that a full test disk
// never evicts the Pods under test.
func kubeletConfig(o Options, dir, caFile, socket string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
`, o.NodeIP, caFile, socket, filepath.Join(dir, "pod-logs"))
}

// kubeProxyConfig: iptables mode, its servers on loopback, node ports only on the node
// address, and no conntrack sysctl or route_localnet touched.
func kubeProxyConfig(o Options, kubeconfig string, healthzPort, metricsPort int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
hostnameOverride: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
clusterCIDR: %s
nodePortAddresses: ["%s/32"]
oomScoreAdj: 0
iptables:
  localhostNodePorts: false
  minSyncPeriod: 1s
  syncPeriod: 30s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, o.NodeName, o.NodeIP, healthzPort, metricsPort, o.PodCIDR, o.NodeIP)
}
