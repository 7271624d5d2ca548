package kubeadm

import (
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/test/guestssh"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/kubedev"
)

const (
	// clusterName is the Cluster API cluster of TestClusterAPIClusterOfTwoArchitectures, in
	// anvil dev's default namespace.
	clusterName = "hybrid"
	// tenant is the namespace of anvil dev where the cluster's anvil Machines and its
	// LoadBalancer live, reached through the AnvilCluster's identityRef.
	tenant = "hybrid-nodes"
)

// A Cluster API cluster made the quick start's way against anvil dev --capi: clusterctl
// generate cluster with anvil's template from a local clusterctl repository (what make
// clusterctl-repo lays out), an amd64 KubeadmControlPlane of one and an arm64
// MachineDeployment of one, applied with kubectl. anvil makes the control-plane endpoint (a
// LoadBalancer: 127.0.0.1 on the host, the segment's gateway for the nodes, forwarded on
// each node by the template's node-local proxy); KubeadmControlPlane runs kubeadm init from
// its own cloud-config, the worker joins through the endpoint, and the test, on the host,
// reaches the workload cluster's API through the same endpoint with Cluster API's own
// kubeconfig: both nodes Ready, each of its architecture, every kube-system Pod ready, a Pod
// running on each architecture; Cluster API sees the control plane initialized and every
// Machine with its Node. The guests are asked too, over SSH: cloud-init done, the kubelet
// and the node-local proxy active. The times it took are logged (docs/kubeadm.md).
//
// The AnvilCluster names an identity from the start, as docs/capi.md asks of a cluster that
// may pivot: a ServiceAccount kubeconfig for namespace tenant of anvil dev, where the anvil
// Machines and the LoadBalancer are made. Once the cluster is Available, it is moved with
// clusterctl to a second management cluster and back (pivotAndBack); then the worker gets a
// new image in place (inPlaceUpdate).
func TestClusterAPIClusterOfTwoArchitectures(t *testing.T) {
	began := time.Now()
	d := kubedev.Start(t, env, "--capi")
	id, err := guestssh.NewIdentity("anvil")
	if err != nil {
		t.Fatal(err)
	}
	a := nameIdentity(t, d)
	manifest := generateCluster(t, d, id)
	if out, err := env.Kubectl(t, d.Kubeconfig, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("applying the generated cluster: %v\n%s", err, out)
	}
	applied := time.Now()
	// Cluster API's objects are in default, the anvil Machines and the LoadBalancer in tenant.
	in := func(ns string) func(args ...string) (string, error) {
		return func(args ...string) (string, error) {
			out, err := env.Kubectl(t, d.Kubeconfig, "", append([]string{"-n", ns}, args...)...)
			return strings.TrimSpace(out), err
		}
	}
	capi, anvil := in("default"), in(tenant)

	// The endpoint is the LoadBalancer's, on loopback.
	env.WaitKubectlFor(t, d.Kubeconfig, 5*time.Minute, "the AnvilCluster's endpoint from its LoadBalancer",
		func(s string) bool { return strings.HasPrefix(s, "127.0.0.1:") },
		"-n", "default", "get", "anvilcluster", clusterName, "-o", "jsonpath={.spec.controlPlaneEndpoint.host}:{.spec.controlPlaneEndpoint.port}")
	endpoint, _ := capi("get", "anvilcluster", clusterName, "-o", "jsonpath={.spec.controlPlaneEndpoint.host}:{.spec.controlPlaneEndpoint.port}")
	lb, _ := anvil("get", "loadbalancers.compute.anvil.dev", clusterName, "-o", "jsonpath={.status.endpoint.host}:{.status.endpoint.port} {.status.segmentEndpoint.host}")
	if lb != endpoint+" 10.200.0.1" {
		t.Errorf("LoadBalancer %s: %q, want the AnvilCluster's endpoint %s and the segment's gateway", clusterName, lb, endpoint)
	}

	// Cluster API's kubeconfig of the workload cluster names the endpoint; the test uses it
	// from the host, so every call below goes through the LoadBalancer.
	lastLook := time.Now()
	if !waitFor(30*time.Minute, func() bool {
		s, _ := capi("get", "cluster", clusterName, "-o", `jsonpath={.status.conditions[?(@.type=="ControlPlaneInitialized")].status}`)
		if s != "True" && time.Since(lastLook) > 8*time.Minute {
			// TCG is slow: what the guest is doing, while the test waits.
			t.Logf("%s after the cluster was applied, the control plane is not initialized; its guest says:\n%s",
				time.Since(applied).Round(time.Second), diagnose(t, d, id, controlPlaneGuests))
			lastLook = time.Now()
		}
		return s == "True"
	}) {
		t.Fatalf("the control plane was not initialized within 30 minutes; the control-plane guests say:\n%s", diagnose(t, d, id, controlPlaneGuests))
	}
	initialized := time.Now()
	encoded, err := capi("get", "secret", clusterName+"-kubeconfig", "-o", "jsonpath={.data.value}")
	if err != nil {
		t.Fatalf("the workload kubeconfig: %v %s", err, encoded)
	}
	kc, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || !strings.Contains(string(kc), "server: https://"+endpoint) {
		t.Fatalf("the workload kubeconfig (%v) does not name the endpoint %s:\n%s", err, endpoint, kc)
	}
	workload := filepath.Join(t.TempDir(), "workload.Kubeconfig")
	if err := os.WriteFile(workload, kc, 0o600); err != nil {
		t.Fatal(err)
	}

	nodes := map[string]string{} // name → architecture
	var lastNodes string
	if !waitFor(40*time.Minute, func() bool {
		lastNodes, _ = env.Kubectl(t, workload, "", "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.nodeInfo.architecture} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		clear(nodes)
		ready := map[string]bool{}
		for _, l := range strings.Split(lastNodes, "\n") {
			f := strings.Fields(l)
			if len(f) == 3 && f[2] == "True" {
				nodes[f[0]], ready[f[1]] = f[1], true
			}
		}
		return len(nodes) == 2 && ready["amd64"] && ready["arm64"]
	}) {
		// Asked over SSH, which does not go through the workload API server.
		t.Fatalf("not two nodes Ready, one of each architecture, within 40 minutes (the workload cluster's last answer: %q); the guests say:\n%s",
			lastNodes, diagnose(t, d, id, "cluster.x-k8s.io/cluster-name="+clusterName))
	}
	allReady := time.Now()
	t.Logf("cluster applied → control plane initialized %s, → both nodes Ready %s (TCG; whole test so far %s)",
		initialized.Sub(applied).Round(time.Second), allReady.Sub(applied).Round(time.Second), time.Since(began).Round(time.Second))
	out, _ := env.Kubectl(t, workload, "", "get", "nodes", "-o", "wide")
	t.Logf("nodes:\n%s", out)

	for _, app := range []string{"component=etcd", "component=kube-apiserver", "component=kube-controller-manager",
		"component=kube-scheduler", "k8s-app=kube-proxy", "k8s-app=kube-dns"} {
		env.WaitKubectlFor(t, workload, 15*time.Minute, app+" ready", allTrue,
			"-n", "kube-system", "get", "pods", "-l", app, "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
	}
	// A Pod on each architecture (the control plane's taint removed; the pause image is an
	// index of both).
	cpNode := ""
	for name, arch := range nodes {
		if arch == "amd64" {
			cpNode = name
		}
	}
	if out, err := writeRetried(t, workload, "not found", "taint", "node", cpNode, "node-role.kubernetes.io/control-plane-"); err != nil {
		t.Fatalf("untainting the control plane: %v\n%s", err, out)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		pod := "sleeper-" + arch
		if out, err := writeRetried(t, workload, "AlreadyExists", "run", pod, "--image=registry.k8s.io/pause:3.10.2", "--restart=Never",
			`--overrides={"spec":{"nodeSelector":{"kubernetes.io/arch":"`+arch+`"}}}`); err != nil {
			t.Fatalf("running a Pod on %s: %v\n%s", arch, err, out)
		}
		env.WaitKubectlFor(t, workload, 10*time.Minute, pod+" Running with a pod-network address",
			func(s string) bool { return strings.HasPrefix(s, "Running 10.244.") },
			"get", "pod", pod, "-o", "jsonpath={.status.phase} {.status.podIP}")
	}

	// Cluster API: every Machine has its Node (by the providerID anvil gave it).
	env.WaitKubectlFor(t, d.Kubeconfig, 10*time.Minute, "both Machines with their Nodes",
		func(s string) bool { f := strings.Fields(s); return len(f) == 2 && f[0] != "" && f[1] != "" },
		"-n", "default", "get", "machines.cluster.x-k8s.io", "-l", "cluster.x-k8s.io/cluster-name="+clusterName,
		"-o", "jsonpath={range .items[*]}{.status.nodeRef.name} {end}")

	// API writes per Machine, of each writer (the audit log of anvil dev's kube-apiserver):
	// anvil's provider (its ServiceAccount) against Cluster API's managers.
	logWritesPerMachine(t, d, 2)

	// Available: KubeadmControlPlane reaches the control plane's etcd and API server.
	env.WaitKubectlFor(t, d.Kubeconfig, 15*time.Minute, "the Cluster Available", func(s string) bool { return s == "True" },
		"-n", "default", "get", "cluster", clusterName, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
	t.Logf("cluster applied → Available %s", time.Since(applied).Round(time.Second))

	// The guests themselves.
	names, _ := anvil("get", "machines.compute.anvil.dev", "-l", "cluster.x-k8s.io/cluster-name="+clusterName, "-o", "jsonpath={.items[*].metadata.name}")
	if len(strings.Fields(names)) != 2 {
		t.Fatalf("anvil Machines of the cluster in %s: %q, want the control plane's and the worker's", tenant, names)
	}
	for _, name := range strings.Fields(names) {
		c := env.LoginIn(t, d.Kubeconfig, tenant, name, id)
		for _, check := range []struct{ command, want string }{
			{"cloud-init status --long", "status: done"},
			{"systemctl is-active kubelet", "active"},
			{"systemctl is-active anvil-apiserver-proxy.socket", "active"},
			{"cat /etc/os-release", "Debian GNU/Linux 12"},
		} {
			if out, err := guestssh.Run(c, check.command); err != nil || !strings.Contains(out, check.want) {
				t.Errorf("%s: %q = %q (%v), want it to say %q", name, check.command, strings.TrimSpace(out), err, check.want)
			}
		}
		c.Close()
	}

	pivotAndBack(t, a, workload)
	inPlaceUpdate(t, d, a, workload, id)
}

// generateCluster lays out clusterctl's local repository (as make clusterctl-repo does) and
// runs clusterctl generate cluster with anvil's template as docs/capi.md's quick start does,
// for an amd64 control plane and an arm64 worker, adding a login for id to every node
// (users: the kubeadm bootstrap provider's own field) and nameIdentity's identityRef to the
// AnvilCluster.
func generateCluster(t *testing.T, d *kubedev.Dev, id *guestssh.Identity) string {
	t.Helper()
	config := harness.ClusterctlRepository(t, filepath.Join(env.BinDir, "kubectl"))
	home := t.TempDir()
	cmd := exec.Command(filepath.Join(env.BinDir, "clusterctl"), "generate", "cluster", clusterName, "--infrastructure", "anvil",
		"--kubernetes-version", d.KubeVersion, "--control-plane-machine-count", "1", "--worker-machine-count", "1",
		"--target-namespace", "default", "--config", config, "--kubeconfig", d.Kubeconfig)
	// One control-plane machine: its controller manager and scheduler run without leader
	// election (the template's ANVIL_LEADER_ELECT); a test cluster's etcd does not sync its
	// emulated disk (ANVIL_ETCD_UNSAFE_NO_FSYNC).
	// The worker has one vCPU (kubedev.WorkerClass), leaving the host's cores to the control plane.
	cmd.Env = append(os.Environ(), "ANVIL_NODE_IMAGE="+d.NodeImage, "ANVIL_WORKER_ARCHITECTURE=arm64",
		"ANVIL_WORKER_MACHINE_CLASS=kube-worker", "ETCD_IMAGE_TAG="+d.EtcdTag,
		"ANVIL_LEADER_ELECT=false", "ANVIL_ETCD_UNSAFE_NO_FSYNC=true", "XDG_CONFIG_HOME="+home, "HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("clusterctl generate cluster: %v\n%s", err, stderr)
	}
	// The login: the user (the kubeadm bootstrap provider's users field) and the host key
	// the test expects. cloud-init's ssh module makes new host keys after write_files, so the
	// key is written aside and put in place by the first preKubeadmCommand.
	private, public := id.HostKey()
	indented := func(s, indent string) string {
		return indent + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+indent) + "\n"
	}
	login := "users:\n- name: anvil\n  sudo: ALL=(ALL) NOPASSWD:ALL\n  shell: /bin/bash\n  sshAuthorizedKeys: [\"" + id.AuthorizedKey() + "\"]\n"
	files := "- path: /etc/anvil/ssh_host_ed25519_key\n  permissions: \"0600\"\n  content: |\n" + indented(private, "    ") +
		"- path: /etc/anvil/ssh_host_ed25519_key.pub\n  content: |\n" + indented(public, "    ")
	command := "- cp /etc/anvil/ssh_host_ed25519_key /etc/anvil/ssh_host_ed25519_key.pub /etc/ssh/ && systemctl restart ssh\n"
	m := string(out)
	if at := "\n  controlPlaneLoadBalancer:\n"; strings.Count(m, at) != 1 {
		t.Fatalf("the generated cluster has %d %q: the test names its identity there", strings.Count(m, at), at)
	}
	m = strings.Replace(m, "\n  controlPlaneLoadBalancer:\n", "\n  identityRef: {name: "+clusterName+"-identity}\n  controlPlaneLoadBalancer:\n", 1)
	for _, indent := range []string{"    ", "      "} { // KubeadmControlPlane's, KubeadmConfigTemplate's
		for _, at := range []string{"\n" + indent + "files:\n", "\n" + indent + "preKubeadmCommands:\n"} {
			if strings.Count(m, at) != 1 {
				t.Fatalf("the generated cluster has %d %q: the test adds its login there", strings.Count(m, at), at)
			}
		}
		m = strings.Replace(m, "\n"+indent+"files:\n", "\n"+indented(login, indent)+indent+"files:\n"+indented(files, indent), 1)
		m = strings.Replace(m, "\n"+indent+"preKubeadmCommands:\n", "\n"+indent+"preKubeadmCommands:\n"+indented(command, indent), 1)
	}
	return m
}

// writeRetried runs a kubectl write against the workload cluster, again every 10 s for up to
// 5 minutes while it fails: an emulated API server answers some writes with "Timeout:
// request did not complete within requested timeout" (session 28's third run, whose
// untaint failed so), though the write may have been done. An error whose output says done
// (what the write says when an earlier try did it: "AlreadyExists", "not found") is success.
func writeRetried(t *testing.T, kubeconfig, done string, args ...string) (string, error) {
	t.Helper()
	var out string
	var err error
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(10 * time.Second) {
		if out, err = env.Kubectl(t, kubeconfig, "", args...); err == nil || strings.Contains(out, done) {
			return out, nil
		}
		if time.Now().After(deadline) {
			return out, err
		}
		t.Logf("kubectl %s: %v (%s); again in 10 s", strings.Join(args, " "), err, strings.TrimSpace(out))
	}
}

// waitFor polls ok every 5 s until it is true (true) or limit passes (false).
func waitFor(limit time.Duration, ok func() bool) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(5 * time.Second) {
		if ok() {
			return true
		}
	}
	return false
}

// controlPlaneGuests selects the cluster's control-plane anvil Machines.
const controlPlaneGuests = "cluster.x-k8s.io/control-plane"

// diagnose asks the cluster's guests that selector picks (in tenant) what kubeadm, the
// kubelet and the control-plane containers did, and how loaded they are, for a failure's
// message.
func diagnose(t *testing.T, d *kubedev.Dev, id *guestssh.Identity, selector string) string {
	t.Helper()
	names, _ := env.Kubectl(t, d.Kubeconfig, "", "-n", tenant, "get", "machines.compute.anvil.dev",
		"-l", selector, "-o", "jsonpath={.items[*].metadata.name}")
	var b strings.Builder
	for _, name := range strings.Fields(names) {
		c := env.LoginIn(t, d.Kubeconfig, tenant, name, id)
		// The node image has no crictl: the kubelet keeps each container's log under
		// /var/log/pods, which only root may list (so root expands the pattern).
		out, _ := guestssh.Run(c, "uptime; free -m; ps -eo pcpu,rss,etime,comm --sort=-pcpu | head -n 8; "+
			"sudo dmesg | grep -i -E 'out of memory|oom-kill|killed process' | tail -n 5; "+
			"sudo sh -c 'for f in /var/log/pods/kube-system_*/*/*.log; do echo == $f; tail -n 15 $f | cut -c1-400; done'; "+
			"sudo journalctl -u kubelet --no-pager | grep -v 'not registered yet' | tail -n 40; sudo tail -n 30 /var/log/cloud-init-output.log; "+
			"ip -4 addr; ip -4 route; systemctl status anvil-apiserver-proxy.socket --no-pager")
		c.Close()
		b.WriteString("== " + name + "\n" + out)
	}
	return b.String()
}

// logWritesPerMachine logs the management cluster's API writes so far, per writer and per
// Machine of the cluster (machines), busiest first (docs/benchmarks.md).
func logWritesPerMachine(t *testing.T, d *kubedev.Dev, machines int) {
	t.Helper()
	counts, err := d.AuditWrites()
	if err != nil {
		t.Fatalf("counting the API writes: %v", err)
	}
	writers := slices.SortedFunc(maps.Keys(counts), func(a, b kubedev.Writer) int { return counts[b] - counts[a] })
	var b strings.Builder
	for _, w := range writers {
		fmt.Fprintf(&b, "  %6d  %6.1f per Machine  %s\n", counts[w], float64(counts[w])/float64(machines), w)
	}
	t.Logf("API writes to the management cluster so far (%d Machines):\n%s", machines, b.String())
}
