package capi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/test/capienv"
)

// readyOf says why an AnvilMachine's Ready condition is not (reason, message-part), or nil.
func readyOf(ctx context.Context, key client.ObjectKey, reason, message string) error {
	am := &infrav1.AnvilMachine{}
	if err := env.Client.Get(ctx, key, am); err != nil {
		return ignoreNotFound(err)
	}
	c := apimeta.FindStatusCondition(am.Status.Conditions, infrav1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, message) {
		return fmt.Errorf("Ready %+v, want False %s saying %q", c, reason, message)
	}
	return nil
}

// An AnvilMachineTemplate asking for an architecture no pool has: the AnvilMachine says so in
// its Ready condition, in anvil's words, and its one anvil Machine is neither remade nor
// multiplied while it waits.
func TestArchitectureNoPoolHasIsReportedNotLooped(t *testing.T) {
	r := theRig(t)
	ctx := context.Background()
	ns := capienv.Namespace(t, env.Client, "noarch")
	cluster := newCluster(t, r, ns, "noarch")
	md := newMachineDeployment(t, cluster, "riscv", machineSpec(r, computev1alpha1.ArchitectureRISCV64), "", 1)
	var key client.ObjectKey
	capienv.Eventually(t, time.Minute, "the AnvilMachine to say no pool fits", func() error {
		machines, err := capienv.MachinesOf(ctx, env.Client, md)
		if err != nil || len(machines) != 1 {
			return fmt.Errorf("%d Machines, %v", len(machines), err)
		}
		key = client.ObjectKey{Namespace: ns, Name: machines[0].Spec.InfrastructureRef.Name}
		return readyOf(ctx, key, infrav1.ReasonProvisioning, "is not scheduled: Unschedulable: no MachinePool fits")
	})
	first := &computev1alpha1.Machine{}
	if err := env.Client.Get(ctx, key, first); err != nil {
		t.Fatal(err)
	}
	// Long enough for any retry loop of the provider (10 s rechecks) or of the scheduler.
	time.Sleep(15 * time.Second)
	anvils := &computev1alpha1.MachineList{}
	if err := env.Client.List(ctx, anvils, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(anvils.Items) != 1 || anvils.Items[0].UID != first.UID {
		t.Fatalf("anvil Machines %d (first %s): the provider made more than the one", len(anvils.Items), first.UID)
	}
	if n := capienv.Events(t, env.Client, ns, "AnvilMachine", key.Name, "MachineCreated"); n != 1 {
		t.Errorf("%d MachineCreated events, want 1", n)
	}
	if err := readyOf(ctx, key, infrav1.ReasonProvisioning, "no matching architecture"); err != nil {
		t.Errorf("the condition does not say why: %v", err)
	}
}

// A bootstrap data Secret without "value" is reported on the AnvilMachine and makes no anvil
// Machine; once fixed, the machine is made.
func TestBootstrapSecretWithoutValue(t *testing.T) {
	r := theRig(t)
	ctx := context.Background()
	ns := capienv.Namespace(t, env.Client, "novalue")
	cluster := newCluster(t, r, ns, "novalue")
	boot := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bootstrapSecret}, boot); err != nil {
		t.Fatal(err)
	}
	base := boot.DeepCopy()
	delete(boot.Data, "value")
	if err := env.Client.Patch(ctx, boot, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	md := newMachineDeployment(t, cluster, "amd64", machineSpec(r, computev1alpha1.ArchitectureAMD64), "zone-a", 1)
	var key client.ObjectKey
	capienv.Eventually(t, time.Minute, "the AnvilMachine to say the bootstrap data has no value", func() error {
		machines, err := capienv.MachinesOf(ctx, env.Client, md)
		if err != nil || len(machines) != 1 {
			return fmt.Errorf("%d Machines, %v", len(machines), err)
		}
		key = client.ObjectKey{Namespace: ns, Name: machines[0].Spec.InfrastructureRef.Name}
		return readyOf(ctx, key, infrav1.ReasonBootstrapDataInvalid, `has no "value" key: the bootstrap provider must write the data there`)
	})
	if err := env.Client.Get(ctx, key, &computev1alpha1.Machine{}); ignoreNotFound(err) != errNotYet {
		t.Fatalf("an anvil Machine was made without bootstrap data: %v", err)
	}
	startStandIns(t, r, ns)
	newControlPlaneMachine(t, r, cluster, "cp-0", computev1alpha1.ArchitectureAMD64)
	base = boot.DeepCopy()
	boot.Data["value"] = []byte("#cloud-config\n")
	if err := env.Client.Patch(ctx, boot, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, md, 1, computev1alpha1.ArchitectureAMD64, "zone-a")
}

// A tenant writes another namespace's providerID into an AnvilMachine it owns, copying the
// names of the victim's objects so the labels match: the provider neither reimages nor
// deletes the victim's anvil Machine.
func TestForeignProviderIDReachesNothing(t *testing.T) {
	r := theRig(t)
	ctx := context.Background()
	victimNS := capienv.Namespace(t, env.Client, "victim")
	startStandIns(t, r, victimNS)
	victimCluster := newCluster(t, r, victimNS, "c1")
	newControlPlaneMachine(t, r, victimCluster, "cp-0", computev1alpha1.ArchitectureAMD64)
	victimMD := newMachineDeployment(t, victimCluster, "amd64", machineSpec(r, computev1alpha1.ArchitectureAMD64), "zone-a", 1)
	victims := waitReplicas(t, victimMD, 1, computev1alpha1.ArchitectureAMD64, "zone-a")
	victimKey := client.ObjectKey{Namespace: victimNS, Name: victims[0].Spec.InfrastructureRef.Name}
	victim := &computev1alpha1.Machine{}
	if err := env.Client.Get(ctx, victimKey, victim); err != nil {
		t.Fatal(err)
	}

	attackerNS := capienv.Namespace(t, env.Client, "attacker")
	newCluster(t, r, attackerNS, "c1")
	owner := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: victimKey.Name, Namespace: attackerNS},
		Spec: clusterv1.MachineSpec{ClusterName: "c1", Bootstrap: clusterv1.Bootstrap{DataSecretName: new(bootstrapSecret)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilMachine", Name: victimKey.Name}}}
	if err := env.Client.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	spec := machineSpec(r, computev1alpha1.ArchitectureAMD64)
	spec.Image = env.Registry.Host + "/attacker/os:1"
	spec.ProviderID = "anvil://" + victimNS + "/" + victimKey.Name
	attack := &infrav1.AnvilMachine{ObjectMeta: metav1.ObjectMeta{Name: victimKey.Name, Namespace: attackerNS,
		Labels:          map[string]string{clusterv1.ClusterNameLabel: "c1"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: owner.Name, UID: owner.UID}}},
		Spec: spec}
	if err := env.Client.Create(ctx, attack); err != nil {
		t.Fatal(err)
	}
	capienv.Eventually(t, time.Minute, "the attacker's AnvilMachine to be refused", func() error {
		return readyOf(ctx, client.ObjectKeyFromObject(attack), infrav1.ReasonForeignProviderID, "names a Machine in namespace "+victimNS)
	})
	if err := env.Client.Delete(ctx, attack); err != nil {
		t.Fatal(err)
	}
	capienv.Eventually(t, time.Minute, "the attacker's AnvilMachine to go", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(attack), &infrav1.AnvilMachine{}); ignoreNotFound(err) != errNotYet {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	after := &computev1alpha1.Machine{}
	if err := env.Client.Get(ctx, victimKey, after); err != nil {
		t.Fatalf("the victim's anvil Machine: %v", err)
	}
	if after.UID != victim.UID || after.DeletionTimestamp != nil || after.Spec.Image != victim.Spec.Image {
		t.Fatalf("the victim's anvil Machine was touched: uid %s→%s, deleting %v, image %s→%s",
			victim.UID, after.UID, after.DeletionTimestamp, victim.Spec.Image, after.Spec.Image)
	}
}

// A bootstrap data Secret in a format anvil cannot boot (neither cloud-init's cloud-config
// nor Ignition): the AnvilMachine's Ready condition says so (BootstrapDataInvalid, naming the
// format and the two anvil boots) and nothing is made for it, neither an anvil Machine nor its
// first-boot Secret, while it waits.
func TestBootstrapSecretOfAFormatAnvilCannotBoot(t *testing.T) {
	r := theRig(t)
	ctx := context.Background()
	ns := capienv.Namespace(t, env.Client, "butane")
	cluster := newCluster(t, r, ns, "butane")
	boot := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bootstrapSecret}, boot); err != nil {
		t.Fatal(err)
	}
	base := boot.DeepCopy()
	boot.Data["format"] = []byte("butane")
	boot.Data["value"] = []byte("variant: fcos\nversion: 1.5.0\n")
	if err := env.Client.Patch(ctx, boot, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	md := newMachineDeployment(t, cluster, "amd64", machineSpec(r, computev1alpha1.ArchitectureAMD64), "zone-a", 1)
	var key client.ObjectKey
	capienv.Eventually(t, time.Minute, "the AnvilMachine to say anvil cannot boot the format", func() error {
		machines, err := capienv.MachinesOf(ctx, env.Client, md)
		if err != nil || len(machines) != 1 {
			return fmt.Errorf("%d Machines, %v", len(machines), err)
		}
		key = client.ObjectKey{Namespace: ns, Name: machines[0].Spec.InfrastructureRef.Name}
		return readyOf(ctx, key, infrav1.ReasonBootstrapDataInvalid, `has format "butane": anvil boots "cloud-config" or "ignition"`)
	})
	// Long enough for the provider's rechecks to have made something if they would.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if err := env.Client.Get(ctx, key, &computev1alpha1.Machine{}); ignoreNotFound(err) != errNotYet {
			t.Fatalf("an anvil Machine was made for bootstrap data anvil cannot boot: %v", err)
		}
		if err := env.Client.Get(ctx, key, &corev1.Secret{}); ignoreNotFound(err) != errNotYet {
			t.Fatalf("a first-boot Secret was made for bootstrap data anvil cannot boot: %v", err)
		}
	}
	if err := readyOf(ctx, key, infrav1.ReasonBootstrapDataInvalid, "set the bootstrap provider's format to one of them"); err != nil {
		t.Error(err)
	}
}

// A template naming an image without Kubernetes (here the test OS, which says nothing of
// itself) for a node that requires it: the AnvilMachine says so (ImageRequirementsUnmet), and
// its anvil Machine is never placed, so nothing boots. This rig's manager reads no image
// (--image-architectures=any), so what it says is that the requirement cannot be checked;
// a scheduler that reads the registry names what the image lacks
// (internal/controller/scheduler TestRequiredImageAnnotationsHoldBackAnImageWithout; anvil
// dev's, in test/kubeadm, boots the node image that says it).
func TestImageWithoutKubernetesIsNotBooted(t *testing.T) {
	r := theRig(t)
	ctx := context.Background()
	ns := capienv.Namespace(t, env.Client, "nokube")
	cluster := newCluster(t, r, ns, "nokube")
	spec := machineSpec(r, computev1alpha1.ArchitectureAMD64)
	spec.RequiredImageAnnotations = map[string]string{computev1alpha1.ImageAnnotationKubernetesVersion: "v1.36.3"}
	md := newMachineDeployment(t, cluster, "nokube", spec, "", 1)
	var key client.ObjectKey
	capienv.Eventually(t, time.Minute, "the AnvilMachine to say its image lacks Kubernetes", func() error {
		machines, err := capienv.MachinesOf(ctx, env.Client, md)
		if err != nil || len(machines) != 1 {
			return fmt.Errorf("%d Machines, %v", len(machines), err)
		}
		key = client.ObjectKey{Namespace: ns, Name: machines[0].Spec.InfrastructureRef.Name}
		return readyOf(ctx, key, infrav1.ReasonImageRequirementsUnmet, "image "+r.image+" cannot be checked")
	})
	m := &computev1alpha1.Machine{}
	if err := env.Client.Get(ctx, key, m); err != nil {
		t.Fatal(err)
	}
	if m.Spec.MachinePoolRef != nil || m.Status.State == computev1alpha1.MachineStateRunning {
		t.Errorf("anvil Machine %s placed on %v (%s) with an image that lacks what it requires", key, m.Spec.MachinePoolRef, m.Status.State)
	}
}
