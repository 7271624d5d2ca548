package config

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	"github.com/anvil-dev/anvil/internal/clusterapi"
	"github.com/anvil-dev/anvil/internal/manifest"
	"github.com/anvil-dev/anvil/test/harness"
)

// generateCluster runs bin/clusterctl generate cluster demo with the quick start's flags (and more) and
// the variables vars, against the management cluster of kubeconfig (KUBECONFIG, as the
// quick start exports it: clusterctl reads anvil's version from its inventory), without
// its version check and with a config folder of its own, in namespace tenant.
func generateCluster(t *testing.T, clusterctl, cfg, kubeconfig string, vars map[string]string, more ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(clusterctl, append([]string{"generate", "cluster", "demo", "--infrastructure", "anvil",
		"--kubernetes-version", "v1.36.3", "--control-plane-machine-count", "1", "--worker-machine-count", "1",
		"--target-namespace", "tenant", "--config", cfg}, more...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir(),
		"CLUSTERCTL_DISABLE_VERSIONCHECK=true", "KUBECONFIG=" + kubeconfig}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd.Output() // an *exec.ExitError carries clusterctl's standard error
}

// The quick start's template (config/clusterctl) through the real clusterctl: a kubeadm
// control plane and workers on anvil Machines, every variable resolved, the node's files as
// docs/kubeadm.md has them, and every object accepted by a management cluster as anvil dev
// --capi makes it (the CRDs' schemas and the providers' webhooks: KubeadmControlPlane refused
// the template's first timeouts). A variable left unset is refused by name.
func TestClusterctlGeneratesTheQuickStartCluster(t *testing.T) {
	kubectl, clusterctl := tool(t, "kubectl"), tool(t, "clusterctl")
	cfg := harness.ClusterctlRepository(t, kubectl)
	vars := map[string]string{
		"ANVIL_NODE_IMAGE":           "127.0.0.1:5001/anvil/kubernetes-node:v1.36.3",
		"ANVIL_WORKER_ARCHITECTURE":  "arm64",
		"ANVIL_WORKER_MACHINE_CLASS": "kube-worker",
	}
	// The management cluster anvil dev --capi makes (internal/clusterapi: Cluster API's three
	// managers with their webhooks, anvil's CRDs, the inventory clusterctl reads anvil's
	// version from), so that the objects meet the providers' own validation too.
	kubeconfig := harness.StartAPIServer(t)
	run := kubectlOn(t, kubectl, kubeconfig)
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bin := filepath.Dir(clusterctl)
	if err := clusterapi.InstallAnvilProvider(ctx, c); err != nil {
		t.Fatal(err)
	}
	managers, err := clusterapi.Start(ctx, restCfg, clusterapi.Options{BinDir: bin, Providers: clusterapi.WithKubeadm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = managers.Stop() }) // before the apiserver stops
	if err := clusterapi.InstallInventory(ctx, c, bin, "capi-system", clusterapi.WithKubeadm); err != nil {
		t.Fatal(err)
	}
	run("create", "namespace", "tenant")
	out, err := generateCluster(t, clusterctl, cfg, kubeconfig, vars)
	if err != nil {
		t.Fatalf("clusterctl generate cluster: %v\n%s", err, stderrOf(err))
	}
	if strings.Contains(string(out), "${") {
		t.Errorf("a variable is left in the output:\n%s", out)
	}
	docs, err := manifest.Documents(out)
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]*unstructured.Unstructured{}
	var kinds []string
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(mustJSON(t, d)); err != nil {
			t.Fatal(err)
		}
		if u.GetNamespace() != "tenant" {
			t.Errorf("%s %s in namespace %q, want tenant", u.GetKind(), u.GetName(), u.GetNamespace())
		}
		byKind[u.GetKind()] = append(byKind[u.GetKind()], u)
		kinds = append(kinds, u.GetKind())
	}
	slices.Sort(kinds)
	want := []string{"AnvilCluster", "AnvilMachineTemplate", "AnvilMachineTemplate", "Cluster", "KubeadmConfigTemplate", "KubeadmControlPlane", "MachineDeployment"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	field := func(u *unstructured.Unstructured, path ...string) any {
		v, _, err := unstructured.NestedFieldNoCopy(u.Object, path...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	kcp, md, ac := byKind["KubeadmControlPlane"][0], byKind["MachineDeployment"][0], byKind["AnvilCluster"][0]
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"the KubeadmControlPlane's version", field(kcp, "spec", "version"), "v1.36.3"},
		{"the KubeadmControlPlane's replicas", field(kcp, "spec", "replicas"), int64(1)},
		{"the KubeadmControlPlane's machine template", field(kcp, "spec", "machineTemplate", "spec", "infrastructureRef", "name"), "demo-control-plane"},
		{"the etcd image tag", field(kcp, "spec", "kubeadmConfigSpec", "clusterConfiguration", "etcd", "local", "imageTag"), "3.6.16-0"},
		{"etcd syncs its disk by default", field(kcp, "spec", "kubeadmConfigSpec", "clusterConfiguration", "etcd", "local", "extraArgs").([]any)[2], map[string]any{"name": "unsafe-no-fsync", "value": "false"}},
		{"the controller manager's leader election (on by default)", field(kcp, "spec", "kubeadmConfigSpec", "clusterConfiguration", "controllerManager", "extraArgs").([]any)[0], map[string]any{"name": "leader-elect", "value": "true"}},
		{"the scheduler's leader election (on by default)", field(kcp, "spec", "kubeadmConfigSpec", "clusterConfiguration", "scheduler", "extraArgs").([]any)[0], map[string]any{"name": "leader-elect", "value": "true"}},
		{"the MachineDeployment's replicas", field(md, "spec", "replicas"), int64(1)},
		{"the MachineDeployment's version", field(md, "spec", "template", "spec", "version"), "v1.36.3"},
		{"the MachineDeployment's bootstrap", field(md, "spec", "template", "spec", "bootstrap", "configRef", "kind"), "KubeadmConfigTemplate"},
		{"the endpoint: anvil's LoadBalancer", field(ac, "spec", "controlPlaneLoadBalancer", "network"), "anvil-nodes"},
		{"no endpoint given", field(ac, "spec", "controlPlaneEndpoint"), nil},
		{"the pod network", field(byKind["Cluster"][0], "spec", "clusterNetwork", "pods", "cidrBlocks"), []any{"10.244.0.0/16"}},
	} {
		if !equalJSON(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.what, c.got, c.want)
		}
	}
	for _, tmpl := range byKind["AnvilMachineTemplate"] {
		spec := field(tmpl, "spec", "template", "spec").(map[string]any)
		arch := map[string]string{"demo-control-plane": "amd64", "demo-md-0": "arm64"}[tmpl.GetName()]
		class := map[string]string{"demo-control-plane": "kube-node", "demo-md-0": "kube-worker"}[tmpl.GetName()]
		nics, _ := json.Marshal(spec["networkInterfaces"])
		if !strings.Contains(string(nics), `"name":"nic1"`) || !strings.Contains(string(nics), `"network":"anvil-nodes"`) {
			t.Errorf("AnvilMachineTemplate %s: NICs %s, want nic1 on the segment anvil-nodes", tmpl.GetName(), nics)
		}
		if !equalJSON(spec["requiredImageAnnotations"], map[string]any{"dev.anvil.kubernetes.version": "v1.36.3"}) {
			t.Errorf("AnvilMachineTemplate %s: requiredImageAnnotations %v, want the node image's Kubernetes version", tmpl.GetName(), spec["requiredImageAnnotations"])
		}
		if spec["image"] != vars["ANVIL_NODE_IMAGE"] || spec["architecture"] != arch ||
			!equalJSON(spec["machinePoolSelector"], map[string]any{"compute.anvil.dev/runtime": "qemu"}) ||
			!equalJSON(spec["machineClassRef"], map[string]any{"name": class}) {
			t.Errorf("AnvilMachineTemplate %s: %v", tmpl.GetName(), spec)
		}
	}
	// The node's files, for the control plane and the workers alike.
	hosts := `[host."http://10.0.2.100:5000/v2/anvil/kube"]`
	for _, files := range [][]any{
		field(kcp, "spec", "kubeadmConfigSpec", "files").([]any),
		field(byKind["KubeadmConfigTemplate"][0], "spec", "template", "spec", "files").([]any),
	} {
		paths := map[string]string{}
		for _, f := range files {
			f := f.(map[string]any)
			paths[f["path"].(string)], _ = f["content"].(string)
		}
		if h := paths["/etc/containerd/certs.d/registry.k8s.io/hosts.toml"]; !strings.Contains(h, hosts) || !strings.Contains(h, "override_path = true") {
			t.Errorf("containerd's mirror of registry.k8s.io is %q, want %s with override_path", h, hosts)
		}
		if !strings.Contains(paths["/etc/anvil/10-bridge.conflist"], `"subnet": "10.244.NODE.0/24"`) || paths["/etc/resolv.conf"] != "nameserver 10.0.2.3\n" {
			t.Errorf("the bridge CNI and resolv.conf: %v", paths)
		}
		// The node-local proxy to the control-plane LoadBalancer, from anvil's metadata.
		if !strings.Contains(paths["/etc/systemd/system/anvil-apiserver-proxy.socket"], "ListenStream={{ ds.meta_data.control_plane_endpoint }}") ||
			!strings.Contains(paths["/etc/systemd/system/anvil-apiserver-proxy.service"], "systemd-socket-proxyd {{ ds.meta_data.control_plane_forward }}") {
			t.Errorf("the node-local proxy's units: %v", paths)
		}
	}

	// kubeadm init's addon phase, run again until it succeeds, on the control plane only.
	if post := field(kcp, "spec", "kubeadmConfigSpec", "postKubeadmCommands"); !equalJSON(post, []any{"/etc/anvil/kubeadm-addons.sh"}) {
		t.Errorf("the control plane's postKubeadmCommands %v, want the addon phase's retry", post)
	}
	script := 0
	for _, f := range field(kcp, "spec", "kubeadmConfigSpec", "files").([]any) {
		if f := f.(map[string]any); f["path"] == "/etc/anvil/kubeadm-addons.sh" {
			script++
			if f["permissions"] != "0755" || !strings.Contains(f["content"].(string), "kubeadm init phase addon all --config /run/kubeadm/kubeadm.yaml && exit 0") {
				t.Errorf("the addon phase's retry script: %v", f)
			}
		}
	}
	if script != 1 {
		t.Errorf("%d files /etc/anvil/kubeadm-addons.sh on the control plane, want 1", script)
	}

	// The workers' identity kept across a reimage (an in-place update): a second disk, the
	// script before and after kubeadm join, exactly as the template has it (clusterctl
	// replaces dollar signs: the script has none); the control plane has neither.
	for _, tmpl := range byKind["AnvilMachineTemplate"] {
		volumes, _ := json.Marshal(field(tmpl, "spec", "template", "spec", "volumes"))
		want := `[{"image":{"size":"10Gi"},"name":"root"}]`
		if tmpl.GetName() == "demo-md-0" {
			want = `[{"image":{"size":"10Gi"},"name":"root"},{"emptyDisk":{"size":"64Mi"},"name":"kubelet-identity"}]`
		}
		if string(volumes) != want {
			t.Errorf("AnvilMachineTemplate %s: volumes %s, want %s", tmpl.GetName(), volumes, want)
		}
	}
	kct := byKind["KubeadmConfigTemplate"][0]
	if pre := field(kct, "spec", "template", "spec", "preKubeadmCommands").([]any); pre[len(pre)-1] != "/etc/anvil/kubelet-identity.py prepare" {
		t.Errorf("the workers' last preKubeadmCommand %v, want the identity's prepare", pre[len(pre)-1])
	}
	if post := field(kct, "spec", "template", "spec", "postKubeadmCommands"); !equalJSON(post, []any{"/etc/anvil/kubelet-identity.py save"}) {
		t.Errorf("the workers' postKubeadmCommands %v, want the identity's save", post)
	}
	if post := field(kcp, "spec", "kubeadmConfigSpec", "postKubeadmCommands"); strings.Contains(fmt.Sprint(post), "kubelet-identity") {
		t.Errorf("the control plane keeps an identity across reimages (%v): it is never reimaged in place", post)
	}
	identity := func(files []any) (string, string) {
		for _, f := range files {
			if f := f.(map[string]any); f["path"] == "/etc/anvil/kubelet-identity.py" {
				return f["content"].(string), fmt.Sprint(f["permissions"])
			}
		}
		return "", ""
	}
	generatedScript, mode := identity(field(kct, "spec", "template", "spec", "files").([]any))
	rawScript := ""
	raw, err := os.ReadFile("clusterctl/cluster-template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rawDocs, err := manifest.Documents(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rawDocs {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(mustJSON(t, d)); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "KubeadmConfigTemplate" {
			rawScript, _ = identity(field(u, "spec", "template", "spec", "files").([]any))
		}
	}
	if mode != "0755" || rawScript == "" || generatedScript != rawScript || !strings.Contains(generatedScript, "dict(file=dict(kubeConfigPath=SAVED))") {
		t.Errorf("the workers' /etc/anvil/kubelet-identity.py (mode %s) is not the template's as written:\n%s", mode, generatedScript)
	}

	generated := filepath.Join(t.TempDir(), "demo.yaml")
	if err := os.WriteFile(generated, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run("apply", "--dry-run=server", "-f", generated); strings.Count(got, "(server dry run)") != len(docs) {
		t.Errorf("kubectl apply --dry-run=server: %d objects accepted of %d:\n%s", strings.Count(got, "(server dry run)"), len(docs), got)
	}

	// The md-remediation flavor (Cluster API's MachineDeploymentRemediationSpec): the same
	// objects and a MachineHealthCheck on the workers, accepted too.
	remediation, err := generateCluster(t, clusterctl, cfg, kubeconfig, vars, "--flavor", "md-remediation")
	if err != nil {
		t.Fatalf("clusterctl generate cluster --flavor md-remediation: %v\n%s", err, stderrOf(err))
	}
	mhcs, err := manifest.Documents(remediation)
	if err != nil {
		t.Fatal(err)
	}
	if len(mhcs) != len(docs)+1 || !strings.Contains(string(remediation), "cluster.x-k8s.io/deployment-name: demo-md-0") ||
		!strings.Contains(string(remediation), "nodeStartupTimeoutSeconds: 3600") {
		t.Errorf("the md-remediation flavor: %d objects (want %d), a MachineHealthCheck of demo-md-0's Machines:\n%s", len(mhcs), len(docs)+1, remediation)
	}
	if err := os.WriteFile(generated, remediation, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run("apply", "--dry-run=server", "-f", generated); strings.Count(got, "(server dry run)") != len(mhcs) {
		t.Errorf("kubectl apply --dry-run=server of the md-remediation flavor: %d objects accepted of %d:\n%s", strings.Count(got, "(server dry run)"), len(mhcs), got)
	}

	delete(vars, "ANVIL_NODE_IMAGE")
	if _, err := generateCluster(t, clusterctl, cfg, kubeconfig, vars); err == nil || !strings.Contains(stderrOf(err), "ANVIL_NODE_IMAGE") {
		t.Errorf("without ANVIL_NODE_IMAGE: %v (%s), want clusterctl's refusal naming it", err, stderrOf(err))
	}
}

// equalJSON compares values as they came out of JSON (numbers as int64 or float64).
func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
