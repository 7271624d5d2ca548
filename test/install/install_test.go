package install

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/poollet/identity"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/testos"
)

// The qemu runtime's state folder on the node (a hostPath of config/hypervisor): its VMs'
// command lines name it.
const qemuState = "/var/lib/anvil/qemu"

const vm = `
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: install-vm}
capabilities: {cpu: "1", memory: 512Mi}
---
apiVersion: v1
kind: Secret
metadata: {name: vm-1-user-data, namespace: default}
stringData:
  userData: |
    #cloud-config
    hostname: vm-1
    # anvil-marker=in-a-pod
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: vm-1, namespace: default}
spec:
  machineClassRef: {name: install-vm}
  architecture: amd64
  image: IMAGE
  userDataRef: {name: vm-1-user-data}
  machinePoolRef: {name: POOL}
`

const server = `
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: install-server}
capabilities: {cpu: "1", memory: 512Mi, anvil.dev/hosts: "1"}
---
apiVersion: v1
kind: Secret
metadata: {name: metal-1-user-data, namespace: default}
stringData:
  userData: |
    #cloud-config
    hostname: metal-1
    # anvil-marker=metal-1
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: metal-1, namespace: default}
spec:
  machineClassRef: {name: install-server}
  architecture: amd64
  image: IMAGE
  userDataRef: {name: metal-1-user-data}
  machinePoolRef: {name: metal}
`

// figure prints a measured duration for docs/benchmarks.md ("Cluster install"); nothing
// asserts on it.
func figure(t *testing.T, name string, d time.Duration) {
	t.Helper()
	t.Logf("figure %s: %.1f s", name, d.Seconds())
	fmt.Printf("figure %s: %.1f s\n", name, d.Seconds())
}

// anvil installed with kubectl apply -k into a real cluster runs its main job there: the
// manager leads, each hypervisor node's DaemonSets register its pool, a VM boots inside
// the runtime's Pod, the site Pod's Ironic deploys a server; losing the manager Pod loses
// nothing, a new poollet Pod adopts the running VM, and kubectl delete -k after a drain
// leaves nothing running.
func TestInstallIntoARealCluster(t *testing.T) {
	ctx := context.Background()
	s := startSite(t, ctx)
	t.Cleanup(func() { devproc.KillQemu(qemuState) })
	node := s.cluster.NodeName()
	s.kubectl(t, "label", "node", node, hypervisorLabel, siteLabel)

	applied := time.Now()
	s.kubectl(t, "apply", "-k", s.overlay)

	s.step(t, "the manager is Ready and one replica leads", func(t *testing.T) {
		s.kubectl(t, "-n", "anvil-system", "rollout", "status", "deployment/anvil-controller-manager", "--timeout=5m")
		pods := strings.Fields(s.kubectl(t, "-n", "anvil-system", "get", "pods", "-l", "app.kubernetes.io/component=controller-manager",
			"-o", "jsonpath={.items[*].metadata.name}"))
		s.env.WaitKubectlFor(t, s.kubeconfig, 2*time.Minute, "name a manager Pod", func(holder string) bool {
			return slices.ContainsFunc(pods, func(p string) bool { return strings.HasPrefix(holder, p) })
		}, "-n", "anvil-system", "get", "lease", "anvil-controller-manager", "-o", "jsonpath={.spec.holderIdentity}")
	})

	s.step(t, "the DaemonSets' poollet registers the node's pool", func(t *testing.T) {
		arch := s.kubectl(t, "get", "node", node, "-o", "jsonpath={.status.nodeInfo.architecture}")
		s.env.WaitKubectlFor(t, s.kubeconfig, 5*time.Minute, "list the node's architecture", func(out string) bool {
			return slices.Contains(strings.Fields(out), arch)
		}, "get", "machinepool", node, "-o", "jsonpath={.status.architectures[*]}")
		for _, r := range []string{"cpu", "memory"} {
			if q := s.kubectl(t, "get", "machinepool", node, "-o", "jsonpath={.status.capacity."+r+"}"); q == "" || q == "0" {
				t.Errorf("pool %s's capacity of %s is %q", node, r, q)
			}
		}
		// The poollet made its node's own identity (the policy lets the DaemonSet's shared
		// one make nothing else; test/security shows it acts as it).
		s.kubectl(t, "-n", "anvil-system", "get", "serviceaccount", "poollet-"+node)
	})

	s.step(t, "a node cannot make itself a hypervisor or the metal site", func(t *testing.T) {
		// The kubelet's own credentials, as a compromised node holds them: NodeRestriction
		// refuses a label with the node-restriction.kubernetes.io/ prefix the DaemonSets
		// and the site select on (an anvil.dev/ one it would take).
		for _, label := range []string{"node-restriction.kubernetes.io/anvil-hypervisor=other", "node-restriction.kubernetes.io/anvil-metal-site=other"} {
			out, err := s.env.Kubectl(t, s.cluster.KubeletKubeconfig(), "", "label", "node", node, label, "--overwrite")
			if err == nil || !strings.Contains(out, "forbidden") {
				t.Errorf("the kubelet labelling its Node %s: %v %s, want forbidden", label, err, out)
			}
		}
	})

	s.apply(t, strings.NewReplacer("IMAGE", s.testOS, "POOL", node).Replace(vm))
	bmc := s.startEmulatedServer(t)
	s.apply(t, strings.ReplaceAll(server, "IMAGE", s.testOS))
	uids := s.uids(t)

	s.step(t, "deleting the leading manager Pod loses nothing", func(t *testing.T) {
		leader := s.kubectl(t, "-n", "anvil-system", "get", "lease", "anvil-controller-manager", "-o", "jsonpath={.spec.holderIdentity}")
		pod, _, _ := strings.Cut(leader, "_")
		s.kubectl(t, "-n", "anvil-system", "delete", "pod", pod, "--wait=false")
		s.env.WaitKubectlFor(t, s.kubeconfig, 3*time.Minute, "name another manager", func(holder string) bool {
			return holder != "" && !strings.HasPrefix(holder, pod)
		}, "-n", "anvil-system", "get", "lease", "anvil-controller-manager", "-o", "jsonpath={.spec.holderIdentity}")
	})

	var qemuPID int
	s.step(t, "a Machine boots as a QEMU guest inside the runtime's Pod", func(t *testing.T) {
		s.env.WaitKubectlFor(t, s.kubeconfig, 5*time.Minute, "be Running", func(out string) bool { return out == "Running" },
			"get", "machine", "vm-1", "-o", "jsonpath={.status.state}")
		figure(t, "apply -k to the first Machine Running", time.Since(applied))
		pids := devproc.QemuProcesses(qemuState)
		if len(pids) != 1 {
			t.Fatalf("QEMU processes of %s: %v, want one", qemuState, pids)
		}
		qemuPID = pids[0]
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", qemuPID))
		if err != nil || !strings.Contains(string(cg), "kubepods") {
			t.Errorf("QEMU (pid %d) is not in a Pod's cgroup: %s %v", qemuPID, cg, err)
		}
		// The VM's own log on the host, where the DaemonSet's runtime keeps it (the API's
		// side is the next step's).
		id := s.kubectl(t, "get", "machine", "vm-1", "-o", "jsonpath={.status.machineID}")
		waitFile(t, qemu.ConsoleLogPath(qemuState, id), testos.ReadyLine(computev1alpha1.ArchitectureAMD64, "vm-1", "in-a-pod"), 5*time.Minute)
	})

	s.step(t, "its console through the API, from either manager replica", func(t *testing.T) {
		s.checkManagersShareTheirConsoleCertificate(t)
		s.checkConsoleInCluster(t, "vm-1", testos.ReadyLine(computev1alpha1.ArchitectureAMD64, "vm-1", "in-a-pod"))
	})

	s.step(t, "the site Pod's Ironic deploys a server", func(t *testing.T) {
		s.env.WaitKubectlFor(t, s.kubeconfig, 15*time.Minute, "be Running", func(out string) bool { return out == "Running" },
			"get", "machine", "metal-1", "-o", "jsonpath={.status.state}")
		s.env.WaitKubectl(t, s.kubeconfig, "Provisioned", "get", "host", "server-1", "-n", "anvil-metal", "-o", "jsonpath={.status.provisioningState}")
		waitFile(t, bmc.ConsolePath("server-1"), testos.ReadyLine(computev1alpha1.ArchitectureAMD64, "metal-1", "metal-1"), 5*time.Minute)
	})

	s.step(t, "the server's console through the API, from the site Pod's session with its BMC", func(t *testing.T) {
		// The session starts once the server is provisioned: its first lines may come before.
		s.checkConsoleInCluster(t, "metal-1", "")
	})

	s.step(t, "nothing was lost", func(t *testing.T) {
		if now := s.uids(t); !maps(now, uids) {
			t.Errorf("objects after the manager's restart: %v, before: %v", now, uids)
		}
	})

	s.step(t, "a new poollet Pod adopts the running VM", func(t *testing.T) {
		machineID := s.kubectl(t, "get", "machine", "vm-1", "-o", "jsonpath={.status.machineID}")
		old := s.kubectl(t, "-n", "anvil-system", "get", "pods", "-l", "app.kubernetes.io/component=qemu-poollet", "-o", "jsonpath={.items[0].metadata.name}")
		restarted := time.Now()
		// kubectl delete returns once the Pod is gone, its poollet stopped: a renewal of the
		// pool's Lease after that is the new poollet's.
		s.kubectl(t, "-n", "anvil-system", "delete", "pod", old)
		gone := time.Now()
		s.kubectl(t, "-n", "anvil-system", "rollout", "status", "daemonset/anvil-qemu-poollet", "--timeout=3m")
		var renewed time.Time
		s.env.WaitKubectlFor(t, s.kubeconfig, 3*time.Minute, "be renewed by the new poollet", func(out string) bool {
			var err error
			renewed, err = time.Parse(time.RFC3339Nano, out)
			return err == nil && renewed.After(gone)
		}, "-n", "anvil-pool-leases", "get", "lease", node, "-o", "jsonpath={.spec.renewTime}")
		figure(t, "poollet Pod deleted to the new poollet's first renewal, the VM adopted", renewed.Sub(restarted))
		if got := s.kubectl(t, "get", "machine", "vm-1", "-o", "jsonpath={.status.state} {.status.machineID}"); got != "Running "+machineID {
			t.Errorf("after the poollet's restart vm-1 is %q, want Running %s", got, machineID)
		}
		// Still so after a few of the new poollet's rounds (--interval 2s): it kept the VM
		// rather than taking it for an orphan.
		renewals := 0
		s.env.WaitKubectlFor(t, s.kubeconfig, time.Minute, "be renewed three more times", func(out string) bool {
			if r, err := time.Parse(time.RFC3339Nano, out); err == nil && r.After(renewed) {
				renewed, renewals = r, renewals+1
			}
			return renewals >= 3
		}, "-n", "anvil-pool-leases", "get", "lease", node, "-o", "jsonpath={.spec.renewTime}")
		if pids := devproc.QemuProcesses(qemuState); !slices.Equal(pids, []int{qemuPID}) {
			t.Errorf("QEMU processes after the poollet's restart: %v, want the same one, %d", pids, qemuPID)
		}
		if got := s.kubectl(t, "get", "machine", "vm-1", "-o", "jsonpath={.status.state} {.status.machineID}"); got != "Running "+machineID {
			t.Errorf("rounds after the poollet's restart vm-1 is %q, want Running %s", got, machineID)
		}
		// The new poollet's console endpoint has a CA of its own, which it published.
		s.checkConsoleInCluster(t, "vm-1", testos.ReadyLine(computev1alpha1.ArchitectureAMD64, "vm-1", "in-a-pod"))
	})

	s.step(t, "drained, kubectl delete -k leaves nothing running", func(t *testing.T) {
		s.kubectl(t, "delete", "machine", "--all", "-A", "--timeout=10m")
		s.kubectl(t, "delete", "-k", s.overlay, "--timeout=5m")
		s.env.WaitKubectlFor(t, s.kubeconfig, 3*time.Minute, "list no Pod", func(out string) bool { return out == "" },
			"get", "pods", "-n", "anvil-system", "-o", "name")
		s.env.WaitKubectlFor(t, s.kubeconfig, 3*time.Minute, "list no Pod", func(out string) bool { return out == "" },
			"get", "pods", "-n", "anvil-metal", "-o", "name")
		if pids := devproc.QemuProcesses(qemuState); len(pids) > 0 {
			t.Errorf("QEMU processes left after delete -k: %v", pids)
		}
		// The site Pod's Ironic, by its state folder: other Ironics on this machine (another
		// test package's, a chaos run's) are not this install's.
		if pids := processesNamed("ironic", "/var/lib/anvil/metal/"); len(pids) > 0 {
			t.Errorf("Ironic processes left after delete -k: %v", pids)
		}
		// What the poollets made for their nodes is not in the kustomization: it goes by its
		// label, as docs/cluster-install.md says.
		made := "clusterrolebinding,rolebinding,serviceaccount"
		if out := s.kubectl(t, "get", made, "-A", "-l", identity.Label, "-o", "name"); out == "" {
			t.Error("the node poollet's identity carries no label to remove it by")
		}
		s.kubectl(t, "delete", made, "-A", "-l", identity.Label)
		// Every cluster-wide object anvil ships or makes is named anvil-... (the test
		// cluster's own are anvil:...).
		for _, o := range strings.Fields(s.kubectl(t, "get", "clusterrolebinding,clusterrole", "-o", "name")) {
			if _, name, _ := strings.Cut(o, "/"); strings.HasPrefix(name, "anvil-") {
				t.Errorf("left after delete -k and the label's delete: %s", o)
			}
		}
	})
}

// step runs one subtest and ends the test when it failed: each step needs the ones before.
// Most steps wait on anvil's Pods, so a failed one shows them (podReport).
func (s *site) step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.Log(s.podReport(t))
		t.FailNow()
	}
}

// podReport is what a person needs when Pods did not become Ready: every Pod, and the last
// lines of the current and previous logs of each container that is not Ready.
func (s *site) podReport(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	kubectl := func(args ...string) string {
		out, err := s.env.Kubectl(t, s.kubeconfig, "", args...)
		if err != nil {
			out += err.Error() + "\n"
		}
		return out
	}
	fmt.Fprintf(&b, "kubectl get pods -A -o wide:\n%s", kubectl("get", "pods", "-A", "-o", "wide"))
	var pods corev1.PodList
	raw := kubectl("get", "pods", "-A", "-o", "json")
	if err := json.Unmarshal([]byte(raw), &pods); err != nil {
		return b.String() + fmt.Sprintf("listing the Pods: %v\n%s", err, raw)
	}
	for _, p := range pods.Items {
		for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if c.Ready || c.State.Terminated != nil && c.State.Terminated.ExitCode == 0 {
				continue
			}
			args := []string{"-n", p.Namespace, "logs", p.Name, "-c", c.Name, "--tail=40"}
			fmt.Fprintf(&b, "kubectl %s:\n%s", strings.Join(args, " "), kubectl(args...))
			if c.RestartCount > 0 {
				args = append(args, "--previous")
				fmt.Fprintf(&b, "kubectl %s:\n%s", strings.Join(args, " "), kubectl(args...))
			}
		}
	}
	return b.String()
}

// uids are the anvil objects a user made, name to UID.
func (s *site) uids(t *testing.T) map[string]string {
	t.Helper()
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Namespace, Name, UID string
			} `json:"metadata"`
		} `json:"items"`
	}
	out := s.kubectl(t, "get", "machines,machineclasses,hosts,hostpolicies", "-A", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, i := range list.Items {
		m[i.Kind+" "+i.Metadata.Namespace+"/"+i.Metadata.Name] = i.Metadata.UID
	}
	return m
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// waitFile waits until the file at path holds line.
func waitFile(t *testing.T, path, line string, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(time.Second) {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), line) {
			return
		}
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("%s did not show %q within %s; it holds:\n%s", path, line, limit, tail(string(b), 2000))
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// processesNamed are the pids of processes whose program's name starts with prefix and whose
// command line holds inCommandLine.
func processesNamed(prefix, inCommandLine string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(b)), prefix) {
			continue
		}
		if cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(cmdline), inCommandLine) {
			pids = append(pids, pid)
		}
	}
	return pids
}
