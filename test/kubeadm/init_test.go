package kubeadm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/kubeimages"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/guestssh"
)

// nodeClass is a control-plane node's size: kubeadm's preflight wants 2 CPUs and 1.7 GB.
const nodeClass = `
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: kube-node}
capabilities: {cpu: "2", memory: 3Gi}
`

// nodeMachine is an amd64 node-image Machine on the QEMU pool, on the network that reaches
// the registry's public Kubernetes images.
const nodeMachine = `
apiVersion: v1
kind: Secret
metadata: {name: NAME-user-data, namespace: default}
stringData:
  userData: |
USERDATA
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: NAME, namespace: default}
spec:
  machineClassRef: {name: kube-node}
  architecture: amd64
  image: IMAGE
  hostname: NAME
  userDataRef: {name: NAME-user-data}
  machinePoolSelector: {compute.anvil.dev/runtime: qemu}
  volumes:
  - name: root
    image: {size: 10Gi}
  networkInterfaces:
  - name: nic0
    ephemeral:
      networkInterfaceTemplate:
        spec: {network: NETWORK}
`

// nodeFiles is the cloud-config write_files a node needs beside the image: containerd's
// mirror of registry.k8s.io (anvil dev's public folder on the node's network; a pull
// reads it, nothing restarts), a bridge pod network, and kubeadm's configuration (the etcd
// image anvil builds is the project's etcd pin; TCG needs longer waits than kubeadm's).
// The QEMU pool's restricted network gives a guest an address but no IPv4 route and no
// resolver: kubeadm would take the IPv6 router's address for the API's, so the address is
// named, and the kubelet needs some resolv.conf (one that answers nothing; CoreDNS's loop
// check refuses a loopback one).
const nodeFiles = `write_files:
  - path: /etc/resolv.conf
    content: |
      nameserver 10.0.2.3
  - path: /etc/containerd/certs.d/registry.k8s.io/hosts.toml
    content: |
      server = "https://registry.k8s.io"
      [host."http://REGISTRY/v2/KUBEFOLDER"]
        capabilities = ["pull", "resolve"]
        override_path = true
  - path: /etc/cni/net.d/10-bridge.conflist
    content: |
      {"cniVersion": "1.0.0", "name": "pods", "plugins": [
        {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
        {"type": "portmap", "capabilities": {"portMappings": true}}]}
  - path: /etc/anvil/kubeadm.yaml
    content: |
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: InitConfiguration
      localAPIEndpoint: {advertiseAddress: 10.0.2.15}
      nodeRegistration:
        kubeletExtraArgs: [{name: node-ip, value: 10.0.2.15}]
      timeouts:
        controlPlaneComponentHealthCheck: 20m
        kubeletHealthCheck: 10m
        kubernetesAPICall: 5m
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: ClusterConfiguration
      kubernetesVersion: KUBEVERSION
      etcd:
        local: {imageTag: ETCDTAG}
      networking: {podSubnet: 10.244.0.0/16}
`

// kubeDev is the package's anvil dev with the node image and control-plane images published.
type kubeDev struct {
	kubeconfig, state, registryPort string
	nodeImage, kubeVersion          string
	// etcdTag is the tag of make kube-images' etcd image (the project's etcd pin, not
	// kubeadm's default).
	etcdTag string
}

func startDev(tb testing.TB) *kubeDev {
	tb.Helper()
	// A short folder: the QEMU pools' QMP sockets live under it, within Linux's 107 bytes.
	state, err := os.MkdirTemp("", "kd")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(state) })
	tb.Cleanup(func() { devproc.KillQemu(state) })
	nodeDir, imagesDir := filepath.Join(env.BinDir, "node-image"), filepath.Join(env.BinDir, "kube-images")
	version, err := os.ReadFile(filepath.Join(nodeDir, "KUBERNETES_VERSION"))
	if err != nil {
		tb.Fatalf("the node image is missing: %v (run make node-image)", err)
	}
	images, err := kubeimages.Read(imagesDir)
	if err != nil {
		tb.Fatal(err)
	}
	etcdTag := ""
	for _, im := range images {
		if im.Name == "etcd" {
			etcdTag = im.Tag
		}
	}
	if etcdTag == "" {
		tb.Fatalf("make kube-images' build in %s has no etcd image", imagesDir)
	}
	registryPort := devproc.FreePort(tb)
	dv := env.StartDev(tb, "--state-dir", state, "--bin-dir", env.BinDir, "--fake-pool", "", "--metal-pool=false",
		"--apiserver-port", devproc.FreePort(tb), "--etcd-port", devproc.FreePort(tb), "--etcd-peer-port", devproc.FreePort(tb),
		"--registry-port", registryPort, "--node-image", nodeDir, "--kube-images", imagesDir)
	tb.Cleanup(func() { dv.Stop(syscall.SIGTERM) })
	d := &kubeDev{kubeconfig: filepath.Join(state, "kubeconfig"), state: state, registryPort: registryPort,
		kubeVersion: strings.TrimSpace(string(version)), etcdTag: etcdTag}
	d.nodeImage = "127.0.0.1:" + registryPort + "/" + dev.NodeImageRepository + ":" + d.kubeVersion
	env.Apply(tb, d.kubeconfig, nodeClass)
	return d
}

// createNode creates the node-image Machine name and returns the login its user data allows.
func (d *kubeDev) createNode(tb testing.TB, name string) *guestssh.Identity {
	tb.Helper()
	id, err := guestssh.NewIdentity("anvil")
	if err != nil {
		tb.Fatal(err)
	}
	files := strings.NewReplacer("REGISTRY", dev.KubeGuestRegistry, "KUBEFOLDER", dev.KubeFolder,
		"KUBEVERSION", d.kubeVersion, "ETCDTAG", d.etcdTag).Replace(nodeFiles)
	userData := "#cloud-config\n" + id.CloudConfig() + files
	y := strings.ReplaceAll(nodeMachine, "USERDATA", "    "+strings.ReplaceAll(strings.TrimRight(userData, "\n"), "\n", "\n    "))
	y = strings.NewReplacer("NAME", name, "IMAGE", d.nodeImage, "NETWORK", dev.KubeNetwork).Replace(y)
	env.Apply(tb, d.kubeconfig, y)
	return id
}

// A control plane made by kubeadm in a node-image guest, by hand (kubeadm init over SSH, as
// an admin would): the images come from anvil dev's registry through containerd's mirror,
// the node becomes Ready on the bridge pod network, every kube-system Pod runs (CoreDNS
// ready means a Pod reached the API through the kubernetes Service, so kube-proxy's rules
// work), and a Pod of the test's runs. The time kubeadm init took is logged: it is the
// by-hand figure a Cluster API control plane's is compared with (docs/kubeadm.md).
func TestKubeadmInitInANodeImageGuest(t *testing.T) {
	d := startDev(t)
	const name = "kube-cp"
	c := env.Login(t, d.kubeconfig, name, d.createNode(t, name))
	defer c.Close()
	took := kubeadmInit(t, c, d.kubeVersion)
	t.Logf("kubeadm init in a TCG guest (2 vCPUs, 3 GiB) took %s", took.Round(time.Second))

	kubectl := "sudo kubectl --kubeconfig /etc/kubernetes/admin.conf "
	waitGuest(t, c, 10*time.Minute, "the node Ready", kubectl+"get node "+name+" -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}'",
		func(s string) bool { return s == "True" })
	for _, app := range []string{"component=etcd", "component=kube-apiserver", "component=kube-controller-manager",
		"component=kube-scheduler", "k8s-app=kube-proxy", "k8s-app=kube-dns"} {
		waitGuest(t, c, 15*time.Minute, app+" ready", kubectl+"-n kube-system get pods -l "+app+
			" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}'",
			allTrue)
	}
	// A Pod of the test's on the control-plane node: its taint removed, the pause image.
	if out, err := guestssh.Run(c, kubectl+"taint node "+name+" node-role.kubernetes.io/control-plane- && "+
		kubectl+"run sleeper --image=registry.k8s.io/pause:3.10.2 --restart=Never"); err != nil {
		t.Fatalf("running a Pod: %v\n%s", err, out)
	}
	waitGuest(t, c, 5*time.Minute, "the test's Pod Running with a pod-network address",
		kubectl+"get pod sleeper -o jsonpath='{.status.phase} {.status.podIP}'",
		func(s string) bool { return strings.HasPrefix(s, "Running 10.244.0.") })
	if out, err := guestssh.Run(c, "systemctl is-active kubelet"); err != nil || strings.TrimSpace(out) != "active" {
		t.Errorf("the kubelet service is %q (%v)", strings.TrimSpace(out), err)
	}
}

// kubeadmInit checks that the guest logged in as c is a node image of kubeVersion ready for
// kubeadm, then runs kubeadm init with the user data's configuration and returns how long
// it took.
func kubeadmInit(tb testing.TB, c *ssh.Client, kubeVersion string) time.Duration {
	tb.Helper()
	for _, check := range []struct{ command, want string }{
		{"cloud-init status --wait --long", "status: done"},
		{"systemctl is-active containerd", "active"},
		{"kubeadm version -o short", kubeVersion},
		{"uname -m", "x86_64"},
	} {
		if out, err := guestssh.Run(c, check.command); err != nil || !strings.Contains(out, check.want) {
			tb.Fatalf("%q = %q (%v), want it to say %q", check.command, strings.TrimSpace(out), err, check.want)
		}
	}
	began := time.Now()
	out, err := guestssh.Run(c, "sudo kubeadm init --config /etc/anvil/kubeadm.yaml 2>&1")
	took := time.Since(began)
	if err != nil {
		kubelet, _ := guestssh.Run(c, "sudo journalctl -u kubelet --no-pager | tail -n 40; sudo journalctl -u containerd --no-pager | tail -n 20")
		tb.Fatalf("kubeadm init: %v\n%s\nkubelet and containerd:\n%s", err, out, kubelet)
	}
	if !strings.Contains(out, "Your Kubernetes control-plane has initialized successfully") {
		tb.Fatalf("kubeadm init did not say it succeeded:\n%s", out)
	}
	return took
}

// kubeadm init by hand in a node-image guest (the same guest, configuration and images as
// TestKubeadmInitInANodeImageGuest), from the command to its success: the figure a Cluster
// API control plane's time to Available is compared with, and how much of either is TCG.
// One anvil dev; each round a new Machine, deleted after.
func BenchmarkKubeadmInitByHand(b *testing.B) {
	d := startDev(b)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("kube-bench-%d", i)
		c := env.Login(b, d.kubeconfig, name, d.createNode(b, name))
		total += kubeadmInit(b, c, d.kubeVersion)
		c.Close()
		if out, err := env.Kubectl(b, d.kubeconfig, "", "delete", "machine", name, "--wait=true"); err != nil {
			b.Fatalf("deleting %s: %v\n%s", name, err, out)
		}
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/init")
}

// allTrue says whether every line of s (one a Pod) is True, and there is one: a Pod that
// has no Ready condition yet prints an empty line.
func allTrue(s string) bool {
	lines := strings.Split(s, "\n")
	for _, l := range lines {
		if strings.TrimSpace(l) != "True" {
			return false
		}
	}
	return len(lines) > 0
}

// waitGuest runs command in the guest until ok accepts its trimmed output, failing after
// limit with the last output.
func waitGuest(t *testing.T, c *ssh.Client, limit time.Duration, what, command string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		out, err := guestssh.Run(c, command)
		out = strings.TrimSpace(out)
		if err == nil && ok(out) {
			return
		}
		if time.Now().After(deadline) {
			pods, _ := guestssh.Run(c, "sudo kubectl --kubeconfig /etc/kubernetes/admin.conf get pods -A -o wide; sudo kubectl --kubeconfig /etc/kubernetes/admin.conf get events -A | tail -n 30")
			t.Fatalf("waiting %s for %s: last %q (%v)\n%s", limit, what, out, err, pods)
		}
		time.Sleep(5 * time.Second)
	}
}
