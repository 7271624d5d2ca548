package kubeadm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/guestssh"
	"github.com/anvil-dev/anvil/test/kubedev"
)

// inPlaceUpdate rolls the workers' MachineDeployment to a new node image (the same disks
// pushed again under another tag with one more annotation: another digest) by a template
// that differs only in its image. Cluster API asks anvil's extension (anvil dev --capi serves
// and registers it), which answers that anvil reimages the worker where it is. After: the
// same Machine, AnvilMachine, anvil Machine and Node (UIDs) and no other Machine; the anvil
// Machine runs the new image; the guest booted again from a new root disk (the Node's boot
// id changed, a file written before is gone) and joined again under its name with the
// identity it kept on its kubelet-identity disk (the join's bootstrap token had long
// expired); its Node is Ready, cloud-init says done, and a new Pod runs there.
func inPlaceUpdate(t *testing.T, d *kubedev.Dev, a managementA, workload string, id *guestssh.Identity) {
	t.Helper()
	ctx := context.Background()
	mds := &clusterv1.MachineDeploymentList{}
	machines := &clusterv1.MachineList{}
	if err := a.client.List(ctx, mds, client.InNamespace("default")); err != nil || len(mds.Items) != 1 {
		t.Fatalf("the cluster's MachineDeployments: %v %d, want one", err, len(mds.Items))
	}
	md := &mds.Items[0]
	if err := a.client.List(ctx, machines, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}); err != nil || len(machines.Items) != 1 {
		t.Fatalf("the workers' Machines: %v %d, want one", err, len(machines.Items))
	}
	worker := machines.Items[0]
	if worker.Status.NodeRef.Name == "" {
		t.Fatalf("worker Machine %s has no Node", worker.Name)
	}
	nodeName, anvilName := worker.Status.NodeRef.Name, worker.Spec.InfrastructureRef.Name
	anvilMachine := &computev1alpha1.Machine{}
	if err := a.client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: anvilName}, anvilMachine); err != nil {
		t.Fatal(err)
	}
	nodeUID, bootID := nodeIdentity(t, workload, nodeName)
	c := env.LoginIn(t, a.kubeconfig, tenant, anvilName, id)
	if out, err := guestssh.Run(c, "sudo touch /var/tmp/before-the-reimage && findmnt -n -o SOURCE,TARGET /var/lib/kubelet/pki"); err != nil ||
		!strings.Contains(out, "/var/lib/kubelet/pki") {
		t.Fatalf("%s: the kubelet's identity disk is not mounted: %v %q", anvilName, err, out)
	}
	c.Close()

	image := pushRenamedNodeImage(t, d)
	rolled := time.Now()
	capienv.RollInPlaceFirst(t, a.client, md)
	capienv.RollTo(t, a.client, md, image)

	env.WaitKubectlFor(t, a.kubeconfig, 30*time.Minute, "the worker's anvil Machine running the new image",
		func(s string) bool { return s == image+" Running" },
		"-n", tenant, "get", "machines.compute.anvil.dev", anvilName, "-o", "jsonpath={.status.image.reference} {.status.state}")
	reimaged := time.Now()
	var last string
	if !waitFor(40*time.Minute, func() bool {
		last, _ = env.Kubectl(t, workload, "", "get", "node", nodeName, "-o", `jsonpath={.status.nodeInfo.bootID} {.status.conditions[?(@.type=="Ready")].status}`)
		f := strings.Fields(last)
		return len(f) == 2 && f[0] != bootID && f[1] == "True"
	}) {
		t.Fatalf("Node %s not Ready after a new boot within 40 minutes (boot id and Ready: %q, boot id before %s); the guests say:\n%s",
			nodeName, last, bootID, diagnose(t, d, id, "cluster.x-k8s.io/cluster-name="+clusterName))
	}
	t.Logf("in-place update: rollout → anvil Machine on the new image %s, → Node Ready again %s (TCG)",
		reimaged.Sub(rolled).Round(time.Second), time.Since(rolled).Round(time.Second))
	env.WaitKubectlFor(t, a.kubeconfig, 15*time.Minute, "the MachineDeployment up to date with its one Machine",
		func(s string) bool { return s == "1 1" },
		"-n", "default", "get", "machinedeployment", md.Name, "-o", "jsonpath={.status.upToDateReplicas} {.status.availableReplicas}")

	if err := a.client.List(ctx, machines, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}); err != nil {
		t.Fatal(err)
	}
	if len(machines.Items) != 1 || machines.Items[0].UID != worker.UID || machines.Items[0].Status.NodeRef.Name != nodeName {
		t.Errorf("the workers' Machines after the update: %d, want only %s (UID %s) with Node %s", len(machines.Items), worker.Name, worker.UID, nodeName)
	}
	after := &computev1alpha1.Machine{}
	if err := a.client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: anvilName}, after); err != nil || after.UID != anvilMachine.UID {
		t.Errorf("anvil Machine %s/%s after the update: %v, UID %s, want the same object (%s)", tenant, anvilName, err, after.UID, anvilMachine.UID)
	}
	if after.Status.Image == nil || anvilMachine.Status.Image == nil || after.Status.Image.Digest == anvilMachine.Status.Image.Digest {
		t.Errorf("anvil Machine %s's image %+v after the update, %+v before: want another digest", anvilName, after.Status.Image, anvilMachine.Status.Image)
	}
	if uid, _ := nodeIdentity(t, workload, nodeName); uid != nodeUID {
		t.Errorf("Node %s: UID %s after the update, %s before: want the same Node", nodeName, uid, nodeUID)
	}

	c = env.LoginIn(t, a.kubeconfig, tenant, anvilName, id)
	defer c.Close()
	for _, check := range []struct{ command, want string }{
		{"cloud-init status --long", "status: done"},
		{"systemctl is-active kubelet", "active"},
		{"test -e /var/tmp/before-the-reimage && echo kept || echo gone", "gone"},
		{"sudo grep kubelet-identity: /var/log/cloud-init-output.log", "reimaged; joining as " + nodeName},
		{"findmnt -n -o TARGET /var/lib/kubelet/pki", "/var/lib/kubelet/pki"},
	} {
		if out, err := guestssh.Run(c, check.command); err != nil || !strings.Contains(out, check.want) {
			t.Errorf("%s after the update: %q = %q (%v), want it to say %q", anvilName, check.command, strings.TrimSpace(out), err, check.want)
		}
	}
	if out, err := writeRetried(t, workload, "AlreadyExists", "run", "after-the-update", "--image=registry.k8s.io/pause:3.10.2", "--restart=Never",
		`--overrides={"spec":{"nodeName":"`+nodeName+`"}}`); err != nil {
		t.Fatalf("running a Pod on %s after the update: %v\n%s", nodeName, err, out)
	}
	env.WaitKubectlFor(t, workload, 10*time.Minute, "a Pod Running on the updated node",
		func(s string) bool { return strings.HasPrefix(s, "Running 10.244.") },
		"get", "pod", "after-the-update", "-o", "jsonpath={.status.phase} {.status.podIP}")
}

// nodeIdentity is the workload cluster's Node name: its UID and its kubelet's boot id.
func nodeIdentity(t *testing.T, workload, name string) (uid, bootID string) {
	t.Helper()
	out, err := env.Kubectl(t, workload, "", "get", "node", name, "-o", "jsonpath={.metadata.uid} {.status.nodeInfo.bootID}")
	f := strings.Fields(out)
	if err != nil || len(f) != 2 {
		t.Fatalf("Node %s: %v %q", name, err, out)
	}
	return f[0], f[1]
}

// pushRenamedNodeImage pushes make node-image's disks again as the node image's repository
// tagged <version>-in-place, with one more annotation (so another digest), with anvil image
// push and anvil dev's push credential, and returns the tag's reference.
func pushRenamedNodeImage(t *testing.T, d *kubedev.Dev) string {
	t.Helper()
	image := d.NodeImage + "-in-place"
	disks := filepath.Join(env.BinDir, "node-image", "disk")
	push := exec.Command(env.AnvilBin, "image", "push", image,
		"--from", "amd64="+filepath.Join(disks, "amd64"), "--from", "arm64="+filepath.Join(disks, "arm64"),
		"--annotation", computev1alpha1.ImageAnnotationKubernetesVersion+"="+d.KubeVersion,
		"--annotation", "dev.anvil.test/rollout=in-place")
	push.Env = append(os.Environ(), "DOCKER_CONFIG="+filepath.Join(d.State, "docker"))
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("anvil image push %s: %v\n%s", image, err, out)
	}
	return image
}
