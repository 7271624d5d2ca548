package capi_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/harness"
)

// kubeadmClient is an admin client that knows Cluster API's kubeadm kinds too.
func kubeadmClient(t testing.TB) client.Client {
	t.Helper()
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, add := range []func(*runtime.Scheme) error{bootstrapv1.AddToScheme, controlplanev1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A Cluster whose control plane is a KubeadmControlPlane of one replica on an
// AnvilMachineTemplate: KubeadmControlPlane makes a Machine, its KubeadmConfig and its
// AnvilMachine; the kubeadm bootstrap provider writes a cloud-config running kubeadm init;
// anvil's provider makes the anvil Machine that boots exactly that cloud-config (the
// bootstrap Secret itself: it has the anvil Machine's name). Nothing here boots: the fake
// pool runs the machine, and the endpoint answers nobody.
func TestKubeadmControlPlaneBootsKubeadmInit(t *testing.T) {
	r := theRig(t)
	ctx := context.Background()
	c := kubeadmClient(t)
	ns := capienv.Namespace(t, env.Client, "kcp")
	port, err := harness.LoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	const name, marker = "kcp", "echo anvil-kcp-pre-kubeadm"
	tmpl := &infrav1.AnvilMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "cp", Namespace: ns},
		Spec: infrav1.AnvilMachineTemplateSpec{Template: infrav1.AnvilMachineTemplateResource{
			Spec: machineSpec(r, computev1alpha1.ArchitectureAMD64)}}}
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: new(int32(1)),
			Version:  capienv.KubernetesVersion,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilMachineTemplate", Name: tmpl.Name}}},
			KubeadmConfigSpec: bootstrapv1.KubeadmConfigSpec{PreKubeadmCommands: []string{marker}},
		}}
	endpoint := clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(port)}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilCluster", Name: name},
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: name}}}
	start := time.Now()
	if err := capienv.Create(ctx, c, tmpl, kcp,
		&infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: infrav1.AnvilClusterSpec{ControlPlaneEndpoint: endpoint}},
		cluster); err != nil {
		t.Fatal(err)
	}

	// KubeadmControlPlane's Machine, its KubeadmConfig and its AnvilMachine.
	var m clusterv1.Machine
	capienv.Eventually(t, 2*time.Minute, "KubeadmControlPlane to make its Machine", func() error {
		list := &clusterv1.MachineList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			cur, cl := &controlplanev1.KubeadmControlPlane{}, &clusterv1.Cluster{}
			_ = c.Get(ctx, client.ObjectKeyFromObject(kcp), cur)
			_ = c.Get(ctx, client.ObjectKeyFromObject(cluster), cl)
			return fmt.Errorf("%d Machines; KubeadmControlPlane conditions %s; Cluster conditions %s", len(list.Items),
				conditions(cur.Status.Conditions), conditions(cl.Status.Conditions))
		}
		m = list.Items[0]
		if m.Spec.Bootstrap.DataSecretName == nil {
			return fmt.Errorf("Machine %s has no bootstrap data yet", m.Name)
		}
		return nil
	})
	if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; !ok || m.Labels[clusterv1.ClusterNameLabel] != name ||
		!ownedBy(m.OwnerReferences, "KubeadmControlPlane", name) || m.Spec.Version != capienv.KubernetesVersion ||
		m.Spec.Bootstrap.ConfigRef.Kind != "KubeadmConfig" || m.Spec.InfrastructureRef.Kind != "AnvilMachine" {
		t.Fatalf("Machine %s: labels %v, owners %v, version %q, bootstrap %+v, infrastructure %+v: want KubeadmControlPlane %s's control-plane Machine of %s on a KubeadmConfig and an AnvilMachine",
			m.Name, m.Labels, m.OwnerReferences, m.Spec.Version, m.Spec.Bootstrap.ConfigRef, m.Spec.InfrastructureRef, name, capienv.KubernetesVersion)
	}
	cfg := &bootstrapv1.KubeadmConfig{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.Bootstrap.ConfigRef.Name}, cfg); err != nil {
		t.Fatal(err)
	}
	if !ownedBy(cfg.OwnerReferences, "Machine", m.Name) || cfg.Status.DataSecretName != *m.Spec.Bootstrap.DataSecretName {
		t.Errorf("KubeadmConfig %s: owners %v, data Secret %q: want owned by Machine %s, the Machine's %s",
			cfg.Name, cfg.OwnerReferences, cfg.Status.DataSecretName, m.Name, *m.Spec.Bootstrap.DataSecretName)
	}

	// The bootstrap provider's data: a cloud-config that runs kubeadm init against the
	// endpoint, after the KubeadmControlPlane's own command.
	boot := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: *m.Spec.Bootstrap.DataSecretName}, boot); err != nil {
		t.Fatal(err)
	}
	value := boot.Data["value"]
	if string(boot.Data["format"]) != "cloud-config" || boot.Type != clusterv1.ClusterSecretType || !ownedBy(boot.OwnerReferences, "KubeadmConfig", cfg.Name) ||
		boot.Labels[clusterv1.ClusterNameLabel] != name {
		t.Errorf("bootstrap Secret %s: format %q, type %s, owners %v, labels %v: want cloud-config of type %s owned by KubeadmConfig %s",
			boot.Name, boot.Data["format"], boot.Type, boot.OwnerReferences, boot.Labels, clusterv1.ClusterSecretType, cfg.Name)
	}
	for _, want := range []string{"#cloud-config", "kubeadm init", marker, fmt.Sprintf("controlPlaneEndpoint: 127.0.0.1:%d", port), "kubernetesVersion: " + capienv.KubernetesVersion} {
		if !bytes.Contains(value, []byte(want)) {
			t.Errorf("the bootstrap data does not contain %q:\n%s", want, value)
		}
	}
	if i, j := bytes.Index(value, []byte(marker)), bytes.Index(value, []byte("kubeadm init")); i < 0 || j < 0 || i > j {
		t.Errorf("the KubeadmControlPlane's preKubeadmCommand (at %d) does not come before kubeadm init (at %d)", i, j)
	}

	// anvil's provider: the AnvilMachine KubeadmControlPlane cloned from the template becomes
	// an anvil Machine of that template, booting exactly that cloud-config.
	var am infrav1.AnvilMachine
	anvil := &computev1alpha1.Machine{}
	capienv.Eventually(t, time.Minute, "the anvil Machine to run", func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.InfrastructureRef.Name}, &am); err != nil {
			return err
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: am.Name}, anvil); err != nil {
			return fmt.Errorf("anvil Machine %s: %w; AnvilMachine conditions %s, owners %v", am.Name, ignoreNotFound(err),
				conditions(am.Status.Conditions), am.OwnerReferences)
		}
		if anvil.Status.State != computev1alpha1.MachineStateRunning {
			return fmt.Errorf("anvil Machine %s is %s", anvil.Name, anvil.Status.State)
		}
		if ready := apimeta.FindStatusCondition(am.Status.Conditions, infrav1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("AnvilMachine %s Ready %+v", am.Name, ready)
		}
		return nil
	})
	t.Logf("Cluster to running anvil Machine: %s", time.Since(start).Round(100*time.Millisecond))
	if am.Annotations[clusterv1.TemplateClonedFromNameAnnotation] != tmpl.Name || !ownedBy(am.OwnerReferences, "Machine", m.Name) ||
		am.Spec.ProviderID != "anvil://"+ns+"/"+am.Name {
		t.Errorf("AnvilMachine %s: annotations %v, owners %v, providerID %q: want cloned from %s, owned by Machine %s",
			am.Name, am.Annotations, am.OwnerReferences, am.Spec.ProviderID, tmpl.Name, m.Name)
	}
	// kubeadm's bootstrap Secret has the Machine's name, which is also the anvil Machine's:
	// the anvil Machine boots its value in place, and anvil writes nothing over it.
	wantRef := computev1alpha1.SecretKeySelector{Name: *m.Spec.Bootstrap.DataSecretName, Key: "value"}
	if anvil.Spec.Image != r.image || anvil.Spec.Architecture != computev1alpha1.ArchitectureAMD64 || anvil.Spec.MachineClassRef.Name != "small" ||
		anvil.Spec.IgnitionRef != nil || anvil.Spec.UserDataRef == nil || *anvil.Spec.UserDataRef != wantRef ||
		anvil.Labels[infrav1.AnvilMachineLabel] != am.Name || anvil.Labels[clusterv1.ClusterNameLabel] != name {
		t.Errorf("anvil Machine %s: image %s, arch %s, class %s, userDataRef %+v, ignitionRef %+v, labels %v: want the template's, booting %+v",
			anvil.Name, anvil.Spec.Image, anvil.Spec.Architecture, anvil.Spec.MachineClassRef.Name, anvil.Spec.UserDataRef, anvil.Spec.IgnitionRef, anvil.Labels, wantRef)
	}
	firstBoot := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wantRef.Name}, firstBoot); err != nil {
		t.Fatal(err)
	}
	if firstBoot.UID != boot.UID || !bytes.Equal(firstBoot.Data[wantRef.Key], value) || firstBoot.Labels[infrav1.AnvilMachineLabel] != "" {
		t.Errorf("the anvil Machine's first boot is Secret %s (uid %s, labels %v), not the bootstrap provider's %s (uid %s) as it wrote it:\n%s",
			firstBoot.Name, firstBoot.UID, firstBoot.Labels, boot.Name, boot.UID, firstBoot.Data[wantRef.Key])
	}
	capienv.Eventually(t, time.Minute, "the Machine to take the providerID", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(&m), &m); err != nil {
			return err
		}
		if m.Spec.ProviderID != am.Spec.ProviderID {
			return fmt.Errorf("Machine %s providerID %q, want %q", m.Name, m.Spec.ProviderID, am.Spec.ProviderID)
		}
		return nil
	})

	// Bad input, an unreachable endpoint: nothing listens at the Cluster's endpoint while
	// its control-plane machine runs (the rig's provider allows no grace), so the
	// AnvilMachine says Cluster API cannot reach it, without saying how the dial failed;
	// once something accepts connections there, it says so.
	reachable := func(status metav1.ConditionStatus, reason string) func() error {
		return func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(&am), &am); err != nil {
				return err
			}
			got := apimeta.FindStatusCondition(am.Status.Conditions, infrav1.ConditionControlPlaneEndpointReachable)
			if got == nil || got.Status != status || got.Reason != reason || !strings.Contains(got.Message, endpoint.Host) {
				return fmt.Errorf("AnvilMachine %s ControlPlaneEndpointReachable %+v, want %s %s", am.Name, got, status, reason)
			}
			if strings.Contains(got.Message, "refused") {
				return fmt.Errorf("the message says how the dial failed: %s", got.Message)
			}
			return nil
		}
	}
	capienv.Eventually(t, time.Minute, "the AnvilMachine to call the endpoint unreachable", reachable(metav1.ConditionFalse, infrav1.ReasonEndpointUnreachable))
	if ready := apimeta.FindStatusCondition(am.Status.Conditions, infrav1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("AnvilMachine %s Ready %+v with an unreachable endpoint, want True: the machine runs", am.Name, ready)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(endpoint.Host, strconv.Itoa(int(endpoint.Port))))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	capienv.Eventually(t, 2*time.Minute, "the AnvilMachine to see the endpoint accept", reachable(metav1.ConditionTrue, infrav1.ReasonEndpointAccepts))
}

func ownedBy(refs []metav1.OwnerReference, kind, name string) bool {
	for _, r := range refs {
		if r.Kind == kind && r.Name == name {
			return true
		}
	}
	return false
}

// conditions is a short form of conds for a failure message.
func conditions(conds []metav1.Condition) string {
	var out []string
	for _, c := range conds {
		out = append(out, fmt.Sprintf("%s=%s %s %q", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(out, "; ")
}
