// Package controlplanes starts the control plane anvil dev runs (internal/controlplane) on
// free loopback ports, for a test that needs that one rather than the harness's envtest
// one: a second management cluster, a workload cluster whose Nodes register themselves,
// etcd's own TLS. It lives apart from test/harness because internal/controlplane's own
// tests import the harness.
package controlplanes

import (
	"context"

	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/test/harness"
)

// Start starts etcd and kube-apiserver in dir on free loopback ports, the binaries from
// the harness's assets folder. With w set it is the control plane of a workload cluster
// (controlplane.Workload; w.ControllerManagerPort is chosen here). The caller stops it.
func Start(ctx context.Context, dir string, w *controlplane.Workload) (*controlplane.ControlPlane, error) {
	bin, err := harness.AssetsDir()
	if err != nil {
		return nil, err
	}
	ports := make([]int, 4)
	for i := range ports {
		if ports[i], err = harness.LoopbackPort(); err != nil {
			return nil, err
		}
	}
	if w != nil {
		w.ControllerManagerPort = ports[3]
	}
	return controlplane.Start(ctx, controlplane.Config{StateDir: dir, BinDir: bin, Workload: w,
		APIServerPort: ports[0], EtcdClientPort: ports[1], EtcdPeerPort: ports[2]})
}
