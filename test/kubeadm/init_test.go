package kubeadm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/test/guestssh"
	"github.com/anvil-dev/anvil/test/kubedev"
)

// nodeMachine is a node-image Machine on the QEMU pool of its architecture, with a NIC on
// the network that reaches the registry's public Kubernetes images (and its SSH forward)
// and, for a node of a cluster, one on the segment where the namespace's nodes reach each
// other (SEGMENTNIC).
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
  architecture: ARCH
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
        spec: {network: KUBENETWORK}
SEGMENTNIC`

// segmentNIC is a cluster node's second NIC, on the segment.
const segmentNIC = `  - name: nic1
    ephemeral:
      networkInterfaceTemplate:
        spec: {network: NODENETWORK}
`

// nodeFiles is the cloud-config write_files a node needs beside the image: containerd's
// mirror of registry.k8s.io (anvil dev's public folder on the node's network; a pull
// reads it, nothing restarts), a bridge pod network, and kubeadm's configuration (the etcd
// image anvil builds is the project's etcd pin; TCG needs longer waits than kubeadm's).
// On a segment, its DHCP gives the node its address and its only IPv4 default route, so
// kubeadm and the kubelet take the segment's address for the node's, with nothing named.
// A node on the QEMU pool's restricted network alone has an address but no IPv4 route:
// kubeadm would take the IPv6 router's address for the API's, so the address is named
// (LOCALENDPOINT). Neither gives a resolver, and the kubelet needs some resolv.conf (one
// that answers nothing; CoreDNS's loop check refuses a loopback one). Each node has its
// own pod subnet: the bridge plugin keeps Pods on their node, which is enough for Pods to
// run.
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
         "ipam": {"type": "host-local", "ranges": [[{"subnet": "PODSUBNET"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
        {"type": "portmap", "capabilities": {"portMappings": true}}]}
  - path: /etc/anvil/kubeadm.yaml
    content: |
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: InitConfiguration
LOCALENDPOINT      timeouts:
        controlPlaneComponentHealthCheck: 20m
        kubeletHealthCheck: 10m
        kubernetesAPICall: 15m
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: ClusterConfiguration
      kubernetesVersion: KUBEVERSION
      etcd:
        local: {imageTag: ETCDTAG}
      networking: {podSubnet: 10.244.0.0/16}
`

// node is one node-image Machine of the test's.
type node struct {
	name, arch string
	// uname is what uname -m says on its architecture.
	uname string
	// podSubnet is the node's share of the pod network (the bridge plugin's range).
	podSubnet string
	// segment: the node has a NIC on anvil dev's segment, whose address is its own.
	segment bool
}

var (
	controlPlane = node{name: "kube-cp", arch: "amd64", uname: "x86_64", podSubnet: "10.244.0.0/24", segment: true}
	armWorker    = node{name: "kube-arm", arch: "arm64", uname: "aarch64", podSubnet: "10.244.1.0/24", segment: true}
	// lone is a node on the restricted network alone, without the segment.
	lone = node{name: "kube-lone", arch: "amd64", uname: "x86_64", podSubnet: "10.244.0.0/24"}
)

// localEndpoint names the address of a node without the segment (see nodeFiles).
const localEndpoint = `      localAPIEndpoint: {advertiseAddress: 10.0.2.15}
      nodeRegistration:
        kubeletExtraArgs: [{name: node-ip, value: 10.0.2.15}]
`

// createNode creates n's Machine and returns the login its user data allows.
func createNode(tb testing.TB, d *kubedev.Dev, n node) *guestssh.Identity {
	tb.Helper()
	id, err := guestssh.NewIdentity("anvil")
	if err != nil {
		tb.Fatal(err)
	}
	endpoint, nics := localEndpoint, ""
	if n.segment {
		endpoint, nics = "", segmentNIC
	}
	files := strings.NewReplacer("REGISTRY", dev.KubeGuestRegistry, "KUBEFOLDER", dev.KubeFolder,
		"KUBEVERSION", d.KubeVersion, "ETCDTAG", d.EtcdTag, "PODSUBNET", n.podSubnet, "LOCALENDPOINT", endpoint).Replace(nodeFiles)
	userData := "#cloud-config\n" + id.CloudConfig() + files
	y := strings.ReplaceAll(strings.ReplaceAll(nodeMachine, "SEGMENTNIC", nics), "USERDATA",
		"    "+strings.ReplaceAll(strings.TrimRight(userData, "\n"), "\n", "\n    "))
	y = strings.NewReplacer("NAME", n.name, "ARCH", n.arch, "IMAGE", d.NodeImage,
		"KUBENETWORK", dev.KubeNetwork, "NODENETWORK", dev.NodeNetwork).Replace(y)
	env.Apply(tb, d.Kubeconfig, y)
	return id
}

// A control plane made by kubeadm in a node-image guest on the restricted network alone,
// by hand (kubeadm init over SSH, as an admin would): the images come from anvil dev's
// registry through containerd's mirror, the node becomes Ready on the bridge pod network,
// every kube-system Pod runs (CoreDNS ready means a Pod reached the API through the
// kubernetes Service, so kube-proxy's rules work), and a Pod of the test's runs.
func TestKubeadmInitInANodeImageGuest(t *testing.T) {
	d := kubedev.Start(t, env)
	name := lone.name
	c := env.Login(t, d.Kubeconfig, name, createNode(t, d, lone))
	defer c.Close()
	checkNode(t, c, d.KubeVersion, lone)
	took := kubeadmInit(t, c)
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

// A cluster made by kubeadm by hand (over SSH, as an admin would) in two node-image
// guests of two architectures on anvil dev's segment: an amd64 control plane and an
// arm64 worker, both under TCG. The images come from anvil dev's registry through
// containerd's mirror; each node takes the address the segment's DHCP gave it; the worker
// joins through the control plane's segment address; both become Ready on the bridge pod
// network; every kube-system Pod runs (kube-proxy on the worker reaches the API through
// the kubernetes Service, across the segment); a Pod of the test's runs on each
// architecture; and the API server reaches the worker's kubelet (logs of its kube-proxy).
// The time kubeadm init took is logged: the by-hand figure a Cluster API control plane's
// is compared with (docs/kubeadm.md).
func TestKubeadmClusterOfTwoArchitecturesOnASegment(t *testing.T) {
	d := kubedev.Start(t, env)
	// The worker boots once kubeadm init is done: two TCG guests on two host cores
	// starved the control plane's API server (session 26's run: restarted, no answer in
	// 20 minutes).
	cpID := createNode(t, d, controlPlane)
	c := env.Login(t, d.Kubeconfig, controlPlane.name, cpID)
	defer c.Close()
	checkNode(t, c, d.KubeVersion, controlPlane)
	took := kubeadmInit(t, c)
	t.Logf("kubeadm init in a TCG guest (2 vCPUs, 3 GiB) took %s", took.Round(time.Second))
	cpIP := segmentAddress(t, c)
	if addr, _ := env.Kubectl(t, d.Kubeconfig, "", "get", "machine", controlPlane.name, "-o",
		`jsonpath={.status.addresses[?(@.type=="InternalIP")].address}`); !strings.HasPrefix(addr, cpIP) {
		t.Errorf("the control plane's Machine reports InternalIP %q; the guest's segment address is %s", addr, cpIP)
	}

	kubectl := "sudo kubectl --kubeconfig /etc/kubernetes/admin.conf "
	join, err := guestssh.Run(c, "sudo kubeadm token create --print-join-command")
	if err != nil {
		t.Fatalf("kubeadm token create: %v\n%s", err, join)
	}
	workerID := createNode(t, d, armWorker)
	w := env.Login(t, d.Kubeconfig, armWorker.name, workerID)
	defer w.Close()
	checkNode(t, w, d.KubeVersion, armWorker)
	kubeadmJoin(t, w, join, cpIP)

	for _, n := range []node{controlPlane, armWorker} {
		waitGuest(t, c, 15*time.Minute, n.name+" Ready", kubectl+"get node "+n.name+" -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}'",
			func(s string) bool { return s == "True" })
		ip, _ := guestssh.Run(c, kubectl+"get node "+n.name+" -o jsonpath='{.status.addresses[?(@.type==\"InternalIP\")].address}'")
		if !strings.HasPrefix(strings.TrimSpace(ip), "10.200.0.") {
			t.Errorf("node %s's InternalIP is %q, want its segment address", n.name, strings.TrimSpace(ip))
		}
	}
	for _, app := range []string{"component=etcd", "component=kube-apiserver", "component=kube-controller-manager",
		"component=kube-scheduler", "k8s-app=kube-proxy", "k8s-app=kube-dns"} {
		waitGuest(t, c, 15*time.Minute, app+" ready", kubectl+"-n kube-system get pods -l "+app+
			" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}'",
			allTrue)
	}
	// A Pod of the test's on each architecture: the control plane's taint removed, the
	// pause image (an index of both).
	if out, err := guestssh.Run(c, kubectl+"taint node "+controlPlane.name+" node-role.kubernetes.io/control-plane-"); err != nil {
		t.Fatalf("untainting the control plane: %v\n%s", err, out)
	}
	for _, n := range []node{controlPlane, armWorker} {
		pod := "sleeper-" + n.arch
		if out, err := guestssh.Run(c, kubectl+"run "+pod+" --image=registry.k8s.io/pause:3.10.2 --restart=Never "+
			`--overrides='{"spec":{"nodeSelector":{"kubernetes.io/arch":"`+n.arch+`"}}}'`); err != nil {
			t.Fatalf("running a Pod on %s: %v\n%s", n.arch, err, out)
		}
		prefix := "Running " + n.name + " " + strings.TrimSuffix(n.podSubnet, "0/24")
		waitGuest(t, c, 10*time.Minute, pod+" Running on "+n.name+" with an address of its pod subnet",
			kubectl+"get pod "+pod+" -o jsonpath='{.status.phase} {.spec.nodeName} {.status.podIP}'",
			func(s string) bool { return strings.HasPrefix(s, prefix) })
	}
	// The API server reaches the worker's kubelet across the segment.
	proxyPod, err := guestssh.Run(c, kubectl+"-n kube-system get pods -l k8s-app=kube-proxy --field-selector spec.nodeName="+
		armWorker.name+" -o jsonpath='{.items[0].metadata.name}'")
	if err != nil {
		t.Fatalf("the worker's kube-proxy Pod: %v %s", err, proxyPod)
	}
	if out, err := guestssh.Run(c, kubectl+"-n kube-system logs --tail 3 "+strings.TrimSpace(proxyPod)); err != nil {
		t.Errorf("logs of the worker's kube-proxy (the API server to the worker's kubelet): %v\n%s", err, out)
	}
	for _, cl := range []*ssh.Client{c, w} {
		if out, err := guestssh.Run(cl, "systemctl is-active kubelet"); err != nil || strings.TrimSpace(out) != "active" {
			t.Errorf("the kubelet service is %q (%v)", strings.TrimSpace(out), err)
		}
	}
}

// checkNode checks that the guest logged in as c is n's node image of kubeVersion, ready
// for kubeadm.
func checkNode(tb testing.TB, c *ssh.Client, kubeVersion string, n node) {
	tb.Helper()
	for _, check := range []struct{ command, want string }{
		{"cloud-init status --wait --long", "status: done"},
		{"systemctl is-active containerd", "active"},
		{"kubeadm version -o short", kubeVersion},
		{"uname -m", n.uname},
	} {
		if out, err := guestssh.Run(c, check.command); err != nil || !strings.Contains(out, check.want) {
			tb.Fatalf("%s: %q = %q (%v), want it to say %q", n.name, check.command, strings.TrimSpace(out), err, check.want)
		}
	}
}

// segmentAddress is the IPv4 address of the guest's NIC on the segment (nic1, as the
// seed's network-config names it).
func segmentAddress(tb testing.TB, c *ssh.Client) string {
	tb.Helper()
	out, err := guestssh.Run(c, "ip -4 -o addr show nic1")
	fields := strings.Fields(out)
	if err != nil || len(fields) < 4 || fields[2] != "inet" {
		tb.Fatalf("the guest's segment NIC nic1: %v %q", err, out)
	}
	ip, _, _ := strings.Cut(fields[3], "/")
	return ip
}

// kubeadmJoin joins the guest logged in as c to the cluster whose control plane printed
// join (kubeadm token create --print-join-command), with longer waits for TCG, and checks
// that the command names the control plane's segment address.
func kubeadmJoin(tb testing.TB, c *ssh.Client, join, cpIP string) {
	tb.Helper()
	f := strings.Fields(join)
	var endpoint, token, hash string
	for i, w := range f {
		switch {
		case i > 0 && f[i-1] == "join":
			endpoint = w
		case w == "--token" && i+1 < len(f):
			token = f[i+1]
		case w == "--discovery-token-ca-cert-hash" && i+1 < len(f):
			hash = f[i+1]
		}
	}
	if endpoint != cpIP+":6443" || token == "" || hash == "" {
		tb.Fatalf("join command %q: want the control plane at %s:6443, a token and a CA hash", join, cpIP)
	}
	config := fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken: {apiServerEndpoint: "%s", token: "%s", caCertHashes: ["%s"]}
timeouts: {kubeletHealthCheck: 10m, kubernetesAPICall: 15m, tlsBootstrap: 15m, discovery: 10m}
`, endpoint, token, hash)
	if out, err := guestssh.Run(c, "sudo tee /etc/anvil/join.yaml >/dev/null <<'EOT'\n"+config+"EOT"); err != nil {
		tb.Fatalf("writing the join configuration: %v\n%s", err, out)
	}
	out, err := guestssh.Run(c, "sudo kubeadm join --config /etc/anvil/join.yaml 2>&1")
	if err != nil || !strings.Contains(out, "This node has joined the cluster") {
		kubelet, _ := guestssh.Run(c, "sudo journalctl -u kubelet --no-pager | tail -n 40")
		tb.Fatalf("kubeadm join: %v\n%s\nkubelet:\n%s", err, out, kubelet)
	}
}

// kubeadmInit runs kubeadm init with the user data's configuration in the guest logged in
// as c and returns how long it took.
func kubeadmInit(tb testing.TB, c *ssh.Client) time.Duration {
	tb.Helper()
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
// TestKubeadmClusterOfTwoArchitecturesOnASegment), from the command to its success: the figure a Cluster
// API control plane's time to Available is compared with, and how much of either is TCG.
// One anvil dev; each round a new Machine, deleted after.
func BenchmarkKubeadmInitByHand(b *testing.B) {
	d := kubedev.Start(b, env)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		n := lone
		n.name = fmt.Sprintf("kube-bench-%d", i)
		c := env.Login(b, d.Kubeconfig, n.name, createNode(b, d, n))
		checkNode(b, c, d.KubeVersion, n)
		total += kubeadmInit(b, c)
		c.Close()
		if out, err := env.Kubectl(b, d.Kubeconfig, "", "delete", "machine", n.name, "--wait=true"); err != nil {
			b.Fatalf("deleting %s: %v\n%s", n.name, err, out)
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
