package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/test/harness"
)

const (
	// ServiceCIDR is the service range (internal/controlplane's); KubernetesServiceIP is
	// the kubernetes Service's address in it.
	ServiceCIDR         = "10.0.0.0/24"
	KubernetesServiceIP = "10.0.0.1"
	// CNIBridge is the bridge the CNI plugin joins the Pods to.
	CNIBridge = "cni0"
	// NodeLink is the bridge (no ports: host-only) the node address lives on. This kernel
	// has no dummy interfaces; a bridge with no ports serves the same.
	NodeLink = "anvil-node0"
)

// Options configure a node. Every field has a default.
type Options struct {
	// Dir holds everything of the run: configurations, logs (Dir/logs), etcd, containerd's
	// and the kubelet's roots. A new folder under the system's temporary one when empty;
	// Stop leaves it (with the logs), with nothing mounted in it.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
	// kube-proxy and kubelet (make tools): $KUBEBUILDER_ASSETS or the checkout's bin/.
	BinDir string
	// NodeName is the Node's name ("anvil-node0").
	NodeName string
	// NodeIP is the node address ("10.243.0.1"): a /32 on NodeLink that the apiserver
	// binds and advertises, the kubelet serves on and hostNetwork Pods have.
	NodeIP string
	// PodCIDR is the Pods' range ("10.244.0.0/24").
	PodCIDR string
	// APIServerPort is kube-apiserver's port on NodeIP (6443).
	APIServerPort int
	// HostPaths are more host paths the test's workloads write (a hostPath volume such as
	// /run/anvil or /var/lib/anvil), restored like the kubelet's: removed when they did
	// not exist before Start, or cleared of the entries that were added.
	HostPaths []string
	// ReadyTimeout bounds each wait of Start (2 minutes).
	ReadyTimeout time.Duration
}

func (o *Options) defaults() error {
	var err error
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "anvil-cluster-"); err != nil {
			return err
		}
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return err
	}
	if o.BinDir == "" {
		if o.BinDir, err = harness.AssetsDir(); err != nil {
			return err
		}
	}
	if o.NodeName == "" {
		o.NodeName = "anvil-node0"
	}
	if o.NodeIP == "" {
		o.NodeIP = "10.243.0.1"
	}
	if o.PodCIDR == "" {
		o.PodCIDR = "10.244.0.0/24"
	}
	if o.APIServerPort == 0 {
		o.APIServerPort = 6443
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if ip := net.ParseIP(o.NodeIP); ip == nil || ip.To4() == nil {
		return fmt.Errorf("NodeIP %q is not an IPv4 address", o.NodeIP)
	}
	if _, _, err := net.ParseCIDR(o.PodCIDR); err != nil {
		return fmt.Errorf("PodCIDR: %w", err)
	}
	for _, p := range o.HostPaths {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("HostPaths: %q is not a clean absolute path below /", p)
		}
	}
	return nil
}

// Cluster is a running node and its control plane.
type Cluster struct {
	opts      Options
	lock      *os.File
	snap      *snapshot
	cp        *controlplane.ControlPlane
	scheduler *controlplane.Process
	proxy     *controlplane.Process
	container *controlplane.Process
	kubelet   *controlplane.Process
	stopped   bool
	// phases say how long each step of Start took, for the benchmark.
	phases []phase
}

type phase struct {
	name string
	took time.Duration
}

// Kubeconfig is the admin's kubeconfig (system:masters), pointing at NodeIP.
func (c *Cluster) Kubeconfig() string { return c.cp.KubeconfigPath() }

// RESTConfig is a copy of the admin's client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return c.cp.RESTConfig() }

// NodeName is the Node's name.
func (c *Cluster) NodeName() string { return c.opts.NodeName }

// KubeletKubeconfig is the kubelet's own kubeconfig (a node token in system:nodes): what a
// compromised node holds, for tests of what NodeRestriction refuses it.
func (c *Cluster) KubeletKubeconfig() string {
	return filepath.Join(c.opts.Dir, "kubelet", "kubeconfig")
}

// NodeIP is the node address: the Node's InternalIP, and the address of hostNetwork Pods.
func (c *Cluster) NodeIP() string { return c.opts.NodeIP }

// PodCIDR is the Pods' address range.
func (c *Cluster) PodCIDR() string { return c.opts.PodCIDR }

// Dir is the run's folder.
func (c *Cluster) Dir() string { return c.opts.Dir }

// LogDir holds a log per process of the node (kube-scheduler, kube-proxy, containerd,
// kubelet); the control plane's are in Dir/controlplane/logs, the Pods' in Dir/pod-logs.
func (c *Cluster) LogDir() string { return filepath.Join(c.opts.Dir, "logs") }

// ContainerdSocket is containerd's socket (ctr --address SOCKET -n k8s.io ...).
func (c *Cluster) ContainerdSocket() string {
	return filepath.Join(c.opts.Dir, "containerd", "containerd.sock")
}

// Start brings up a node: it takes the machine's node lock (waiting for a node another
// package runs), restores what a killed run left, records the host's state, and starts
// the control plane, kube-proxy, the egress guard, containerd and the kubelet in that
// order, returning when the Node is Ready and the default ServiceAccount exists. On an
// error everything is stopped and restored.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("test/cluster runs a real node and needs root")
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if err := checkTools(o.BinDir); err != nil {
		return nil, err
	}
	c := &Cluster{opts: o}
	if c.lock, err = takeLock(ctx); err != nil {
		return nil, err
	}
	if err := recoverLeftovers(); err != nil {
		c.lock.Close()
		return nil, err
	}
	for _, d := range []string{"logs", "cni/net.d", "cni/ipam", "containerd", "images", "kubelet", "pod-logs", "kube-proxy"} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o700); err != nil {
			c.lock.Close()
			return nil, err
		}
	}
	if c.snap, err = takeSnapshot(o.Dir, o.HostPaths); err != nil {
		c.lock.Close()
		return nil, err
	}
	if err := c.snap.save(); err != nil {
		c.lock.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	// The guard goes in only once kube-proxy DNATs the service IPs, and before anything
	// can start a Pod.
	steps := []struct {
		name string
		run  func() error
	}{
		{"node address", func() error { return addNodeLink(o) }},
		{"control plane", func() error { return c.startControlPlane(ctx) }},
		{"kube-proxy rules", func() error { return c.startProxy(ctx) }},
		{"egress guard", func() error { return installGuard(o) }},
		{"containerd and pause image", func() error { return c.startContainerd(ctx) }},
		{"kubelet to Ready", func() error { return c.startKubelet(ctx) }},
	}
	for _, step := range steps {
		started := time.Now()
		if err := step.run(); err != nil {
			return nil, err
		}
		c.phases = append(c.phases, phase{step.name, time.Since(started)})
	}
	return c, nil
}

// Stop stops every process of the run and restores the host from the snapshot, each step
// even when one before failed; it returns the joined errors, and a list of what still
// differs from the snapshot. Calling it again does nothing.
func (c *Cluster) Stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	var errs []error
	// The kubelet first, so it restarts no container, then the rest gracefully; the Pods'
	// processes and containerd's shims, which outlive containerd, are killed by restore
	// before it lifts the guard.
	errs = append(errs, c.kubelet.Stop(20*time.Second), c.container.Stop(20*time.Second),
		c.proxy.Stop(10*time.Second), c.scheduler.Stop(10*time.Second))
	if c.cp != nil {
		errs = append(errs, c.cp.Stop())
	}
	if c.snap != nil {
		errs = append(errs, restore(c.snap))
		if d := c.snap.diff(); len(d) > 0 {
			errs = append(errs, fmt.Errorf("the host still differs from %s after the restore (the next Start tries again):\n%s", SnapshotPath, strings.Join(d, "\n")))
		} else {
			errs = append(errs, removeSnapshot())
		}
	}
	if c.lock != nil {
		errs = append(errs, c.lock.Close())
	}
	return errors.Join(errs...)
}

func removeSnapshot() error {
	if err := os.Remove(SnapshotPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// recoverLeftovers restores the host from the snapshot a killed run left, if any; with
// none, it refuses to start beside a node it did not make (cni0 or a kubepods cgroup
// present).
func recoverLeftovers() error {
	old, err := loadSnapshot()
	if err != nil {
		return err
	}
	if old != nil {
		if err := restore(old); err != nil {
			return fmt.Errorf("restoring the host from the snapshot %s of a run that did not stop: %w", SnapshotPath, err)
		}
		if d := old.diff(); len(d) > 0 {
			return fmt.Errorf("restoring the host from %s left differences:\n%s", SnapshotPath, strings.Join(d, "\n"))
		}
		return removeSnapshot()
	}
	if linkExists(CNIBridge) || linkExists(NodeLink) {
		return fmt.Errorf("interface %s or %s exists but no snapshot (%s) says a test node made it: another Kubernetes node runs here, or remove it by hand", CNIBridge, NodeLink, SnapshotPath)
	}
	for _, cg := range kubepodsCgroups() {
		if exists(cg) {
			return fmt.Errorf("cgroup %s exists but no snapshot (%s) says a test node made it: another kubelet runs here", cg, SnapshotPath)
		}
	}
	return nil
}

// takeLock waits for the machine's node lock until ctx ends.
func takeLock(ctx context.Context) (*os.File, error) {
	f, err := os.OpenFile(LockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", LockPath, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("another test node holds %s (one node per machine): %w", LockPath, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// checkTools fails naming the fix for each missing binary.
func checkTools(binDir string) error {
	var errs []error
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet"} {
		if info, err := os.Stat(filepath.Join(binDir, b)); err != nil || info.Mode()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("%s not found in %s: run \"make tools\" (or make %s)", b, binDir, filepath.Join(binDir, b)))
		}
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "iptables-save", "iptables-restore", "ip6tables-restore", "ip6tables-save", "nft", "conntrack", "ip", "go"} {
		if _, err := exec.LookPath(b); err != nil {
			errs = append(errs, fmt.Errorf("%s not found in PATH: run hack/install-deps.sh", b))
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", p)); err != nil {
			errs = append(errs, fmt.Errorf("CNI plugin /usr/lib/cni/%s missing: run hack/install-deps.sh (containernetworking-plugins)", p))
		}
	}
	if err := cgroupV1(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// cgroupV1 refuses a host whose /sys/fs/cgroup is cgroup v2: the kubelet's cgroups there are
// /sys/fs/cgroup/kubepods, which the snapshot, the kill of a run's Pods and the restore do
// not know yet (they look in each v1 hierarchy), so Stop could leave Pods running.
func cgroupV1() error {
	var fs syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &fs); err != nil {
		return fmt.Errorf("reading /sys/fs/cgroup: %w", err)
	}
	const cgroup2Magic = 0x63677270
	if fs.Type == cgroup2Magic {
		return errors.New("/sys/fs/cgroup is cgroup v2: test/cluster handles cgroup v1 hosts only so far (its snapshot, Pod kill and restore look in the v1 hierarchies); boot with systemd.unified_cgroup_hierarchy=0 or teach snapshot.go v2")
	}
	return nil
}

// addNodeLink makes the host-only bridge holding the node address, without IPv6, and
// routes the service range to it: the host's own packets to a service IP then leave from
// the node address, and one kube-proxy has no rule for ends on a bridge with no ports
// instead of the default route (the guard drops it before that).
func addNodeLink(o Options) error {
	for _, args := range [][]string{
		{"link", "add", NodeLink, "type", "bridge"},
		{"addr", "add", o.NodeIP + "/32", "dev", NodeLink},
		{"link", "set", NodeLink, "up"},
		{"route", "add", ServiceCIDR, "dev", NodeLink, "src", o.NodeIP},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
	}
	_ = writeSysctl("net.ipv6.conf."+NodeLink+".disable_ipv6", "1")
	return nil
}

// record adds a started process to the snapshot file, so a later run can stop it.
func (c *Cluster) record(ps ...process) error {
	c.snap.Processes = append(c.snap.Processes, ps...)
	return c.snap.save()
}

func (c *Cluster) clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(c.cp.RESTConfig())
}

func pidProcess(pid int) process { return process{PID: pid, Cmdline: cmdline(pid)} }
