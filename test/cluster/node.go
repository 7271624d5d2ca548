package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// startControlPlane starts etcd, kube-apiserver (on the node address) and
// kube-controller-manager with every default controller, then kube-scheduler, and creates
// the Node object: kube-proxy waits up to 30 s for a Node with an address otherwise.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	o := c.opts
	var ports [3]int
	for i := range ports {
		p, err := vm.FreeLoopbackPort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	cp, err := controlplane.Start(ctx, controlplane.Config{
		StateDir: filepath.Join(o.Dir, "controlplane"), BinDir: o.BinDir, Address: o.NodeIP,
		APIServerPort: o.APIServerPort, EtcdClientPort: ports[0], EtcdPeerPort: ports[1],
		ReadyTimeout: o.ReadyTimeout,
		Workload:     &controlplane.Workload{ControllerManagerPort: ports[2], Controllers: []string{"*"}},
	})
	if err != nil {
		return err
	}
	c.cp = cp
	etcd, apiserver := cp.PIDs()
	if err := c.record(pidProcess(etcd), pidProcess(apiserver), pidProcess(cp.ControllerManagerPID())); err != nil {
		return err
	}
	if c.scheduler, err = controlplane.StartProcess("kube-scheduler", filepath.Join(o.BinDir, "kube-scheduler"),
		[]string{"--kubeconfig=" + cp.KubeconfigPath(), "--leader-elect=false", "--secure-port=0"}, c.LogDir(), ""); err != nil {
		return err
	}
	if err := c.record(pidProcess(c.scheduler.PID())); err != nil {
		return err
	}
	return c.createNode(ctx)
}

// createNode registers the Node with its address as the kubelet will; the kubelet then
// finds it and takes it over.
func (c *Cluster) createNode(ctx context.Context) error {
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: c.opts.NodeName,
		Labels: map[string]string{
			corev1.LabelHostname: c.opts.NodeName, corev1.LabelOSStable: "linux", corev1.LabelArchStable: runtime.GOARCH,
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating Node %s: %w", c.opts.NodeName, err)
	}
	// kube-controller-manager writes the new Node too (its TTL annotation).
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, c.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: c.opts.NodeIP},
			{Type: corev1.NodeHostName, Address: c.opts.NodeName},
		}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting Node %s's address: %w", c.opts.NodeName, err)
	}
	return nil
}

// startProxy starts kube-proxy as system:kube-proxy and waits for its kubernetes Service
// rule.
func (c *Cluster) startProxy(ctx context.Context) error {
	o := c.opts
	kubeconfig := filepath.Join(o.Dir, "kube-proxy", "kubeconfig")
	if err := c.writeKubeconfig(kubeconfig, "system:kube-proxy"); err != nil {
		return err
	}
	healthz, err := vm.FreeLoopbackPort()
	if err != nil {
		return err
	}
	metrics, err := vm.FreeLoopbackPort()
	if err != nil {
		return err
	}
	cfg := filepath.Join(o.Dir, "kube-proxy", "config.yaml")
	if err := os.WriteFile(cfg, []byte(kubeProxyConfig(o, kubeconfig, healthz, metrics)), 0o600); err != nil {
		return err
	}
	if c.proxy, err = controlplane.StartProcess("kube-proxy", filepath.Join(o.BinDir, "kube-proxy"), []string{"--config=" + cfg}, c.LogDir(), ""); err != nil {
		return err
	}
	if err := c.record(pidProcess(c.proxy.PID())); err != nil {
		return err
	}
	return waitServiceRules(ctx, o, c.proxy)
}

// writeKubeconfig writes a kubeconfig authenticating as user in groups with a client
// certificate of the cluster CA.
func (c *Cluster) writeKubeconfig(path, user string, groups ...string) error {
	cfg, err := c.cp.ClientConfig(user, groups...)
	if err != nil {
		return err
	}
	return controlplane.WriteKubeconfig(path, cfg)
}

// startContainerd writes the CNI and containerd configurations, starts containerd, waits
// for it to answer and imports the pause image.
func (c *Cluster) startContainerd(ctx context.Context) error {
	o := c.opts
	if err := os.WriteFile(filepath.Join(o.Dir, "cni", "net.d", "10-anvil.conflist"), []byte(cniConfig(o, o.Dir)), 0o600); err != nil {
		return err
	}
	cfg := filepath.Join(o.Dir, "containerd", "config.toml")
	if err := os.WriteFile(cfg, []byte(containerdConfig(o.Dir, c.ContainerdSocket())), 0o600); err != nil {
		return err
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return err
	}
	if c.container, err = controlplane.StartProcess("containerd", bin, []string{"--config=" + cfg}, c.LogDir(), ""); err != nil {
		return err
	}
	if err := c.record(pidProcess(c.container.PID())); err != nil {
		return err
	}
	deadline := time.Now().Add(o.ReadyTimeout)
	for exec.CommandContext(ctx, "ctr", "--address", c.ContainerdSocket(), "version").Run() != nil {
		if err := c.container.Exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd did not answer on %s within %s; its log is %s", c.ContainerdSocket(), o.ReadyTimeout, c.container.LogPath())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return importPause(ctx, o.Dir, c.ContainerdSocket())
}

// startKubelet starts the kubelet as system:node:NAME and waits for the Node to be Ready
// and for the default ServiceAccount and root CA ConfigMap a Pod needs.
func (c *Cluster) startKubelet(ctx context.Context) error {
	o := c.opts
	kubeconfig := c.KubeletKubeconfig()
	if err := c.writeKubeconfig(kubeconfig, "system:node:"+o.NodeName, "system:nodes"); err != nil {
		return err
	}
	cfg := filepath.Join(o.Dir, "kubelet", "config.yaml")
	if err := os.WriteFile(cfg, []byte(kubeletConfig(o, o.Dir, c.cp.CAFile(), c.ContainerdSocket())), 0o600); err != nil {
		return err
	}
	var err error
	if c.kubelet, err = controlplane.StartProcess("kubelet", filepath.Join(o.BinDir, "kubelet"), []string{
		"--config=" + cfg, "--kubeconfig=" + kubeconfig, "--root-dir=" + filepath.Join(o.Dir, "kubelet", "root"),
		// Its self-signed serving certificate goes to /var/lib/kubelet/pki otherwise,
		// whatever --root-dir says.
		"--cert-dir=" + filepath.Join(o.Dir, "kubelet", "pki"),
		"--hostname-override=" + o.NodeName, "--node-ip=" + o.NodeIP, "--v=1"}, c.LogDir(), ""); err != nil {
		return err
	}
	if err := c.record(pidProcess(c.kubelet.PID())); err != nil {
		return err
	}
	return c.waitReady(ctx)
}

func (c *Cluster) waitReady(ctx context.Context) error {
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(c.opts.ReadyTimeout)
	for {
		ready, why := false, "no Node"
		if n, err := cs.CoreV1().Nodes().Get(ctx, c.opts.NodeName, metav1.GetOptions{}); err == nil {
			why = "no Ready condition"
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					ready, why = cond.Status == corev1.ConditionTrue, cond.Reason+": "+cond.Message
				}
			}
		}
		if ready {
			_, saErr := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			_, caErr := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			if saErr == nil && caErr == nil {
				return nil
			}
			why = "Ready, waiting for the default ServiceAccount and kube-root-ca.crt"
		}
		if err := c.kubelet.Exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Node %s not Ready within %s (%s); the kubelet's log is %s:\n%s", c.opts.NodeName, c.opts.ReadyTimeout, why, c.kubelet.LogPath(), controlplane.LogTail(c.kubelet.LogPath(), 20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
