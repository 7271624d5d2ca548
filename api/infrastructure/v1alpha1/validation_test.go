package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/config/crd"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

var installOnce = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return crd.InstallClusterAPIProvider(ctx, env.Client)
})

// installed installs the provider's CRDs, which the harness (like every cluster without
// Cluster API) does not.
func installed(t *testing.T) {
	t.Helper()
	if err := installOnce(); err != nil {
		t.Fatalf("installing the Cluster API provider's CRDs: %v", err)
	}
}

// unique returns a name no other case of the package uses.
func unique(prefix string) string { return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()) }

func validSpec() infrav1.AnvilMachineSpec {
	return infrav1.AnvilMachineSpec{
		MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"},
		Image:           "registry.example/os:1",
	}
}

func anvilMachine(name string, spec infrav1.AnvilMachineSpec) *infrav1.AnvilMachine {
	return &infrav1.AnvilMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: spec}
}

// wantInvalid fails unless err is the apiserver's Invalid error and says msg.
func wantInvalid(t *testing.T, what string, err error, msg string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("%s returned %v, want an Invalid error", what, err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Fatalf("%s: error %q does not say %q", what, err.Error(), msg)
	}
}

func TestAnvilMachineRejectsInvalid(t *testing.T) {
	installed(t)
	size := resource.MustParse("1Gi")
	cases := []struct {
		name    string
		mutate  func(*infrav1.AnvilMachineSpec)
		message string
	}{
		{"providerID of another scheme", func(s *infrav1.AnvilMachineSpec) { s.ProviderID = "metal3://default/m1" },
			"providerID must be anvil://<namespace>/<machine name>"},
		{"providerID without a machine", func(s *infrav1.AnvilMachineSpec) { s.ProviderID = "anvil://default" },
			"providerID must be anvil://<namespace>/<machine name>"},
		{"empty image", func(s *infrav1.AnvilMachineSpec) { s.Image = "" },
			"spec.image: Invalid value"},
		{"class name not a DNS label", func(s *infrav1.AnvilMachineSpec) { s.MachineClassRef.Name = "Small_Class" },
			"machineClassRef.name must be a DNS label"},
		{"unknown architecture", func(s *infrav1.AnvilMachineSpec) { s.Architecture = "x86_64" },
			`spec.architecture: Unsupported value: "x86_64"`},
		{"unknown emulation", func(s *infrav1.AnvilMachineSpec) { s.Emulation = "Sometimes" },
			`spec.emulation: Unsupported value: "Sometimes"`},
		{"two root volumes", func(s *infrav1.AnvilMachineSpec) {
			s.Volumes = []computev1alpha1.MachineVolume{
				{Name: "root", Image: &computev1alpha1.ImageDiskSource{}},
				{Name: "root2", Image: &computev1alpha1.ImageDiskSource{}},
			}
		}, "at most one volume may be the root disk"},
		{"volume with two sources", func(s *infrav1.AnvilMachineSpec) {
			s.Volumes = []computev1alpha1.MachineVolume{{Name: "x",
				EmptyDisk: &computev1alpha1.EmptyDiskSource{Size: size}, VolumeRef: &computev1alpha1.LocalObjectReference{Name: "v"}}}
		}, "each volume sets exactly one of image, emptyDisk, volumeRef or ephemeral"},
		{"NIC with no source", func(s *infrav1.AnvilMachineSpec) {
			s.NetworkInterfaces = []computev1alpha1.MachineNetworkInterface{{Name: "eth0"}}
		}, "each network interface sets exactly one of networkInterfaceRef or ephemeral"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := validSpec()
			tc.mutate(&spec)
			err := env.Client.Create(context.Background(), anvilMachine(unique("invalid"), spec))
			wantInvalid(t, "create", err, tc.message)
		})
	}
}

// Only the image of an AnvilMachine changes after creation (Cluster API writes it there for an
// in-place update), and its providerID once, from empty; anything else is refused with a message
// naming the field and what to do instead.
func TestAnvilMachineChangesOnlyItsImage(t *testing.T) {
	installed(t)
	ctx := context.Background()
	size := resource.MustParse("1Gi")
	full := func() infrav1.AnvilMachineSpec {
		s := validSpec()
		s.Architecture = computev1alpha1.ArchitectureAMD64
		s.Emulation = computev1alpha1.EmulationForbidden
		s.MachinePoolSelector = map[string]string{"site": "a"}
		s.HostSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "1"}}
		s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		s.Volumes = []computev1alpha1.MachineVolume{{Name: "data", EmptyDisk: &computev1alpha1.EmptyDiskSource{Size: size}}}
		s.NetworkInterfaces = []computev1alpha1.MachineNetworkInterface{{Name: "eth0", NetworkInterfaceRef: &computev1alpha1.LocalObjectReference{Name: "nic"}}}
		return s
	}
	for _, tc := range []struct {
		field  string
		mutate func(*infrav1.AnvilMachineSpec)
	}{
		{"machineClassRef", func(s *infrav1.AnvilMachineSpec) { s.MachineClassRef.Name = "large" }},
		{"architecture", func(s *infrav1.AnvilMachineSpec) { s.Architecture = computev1alpha1.ArchitectureARM64 }},
		{"architecture", func(s *infrav1.AnvilMachineSpec) { s.Architecture = "" }},
		{"emulation", func(s *infrav1.AnvilMachineSpec) { s.Emulation = computev1alpha1.EmulationAllowed }},
		{"machinePoolSelector", func(s *infrav1.AnvilMachineSpec) { s.MachinePoolSelector["site"] = "b" }},
		{"machinePoolSelector", func(s *infrav1.AnvilMachineSpec) { s.MachinePoolSelector = nil }},
		{"hostSelector", func(s *infrav1.AnvilMachineSpec) { s.HostSelector.MatchLabels["rack"] = "2" }},
		{"tolerations", func(s *infrav1.AnvilMachineSpec) { s.Tolerations = nil }},
		{"volumes", func(s *infrav1.AnvilMachineSpec) { s.Volumes[0].EmptyDisk.Size = resource.MustParse("2Gi") }},
		{"networkInterfaces", func(s *infrav1.AnvilMachineSpec) {
			s.NetworkInterfaces = append(s.NetworkInterfaces, computev1alpha1.MachineNetworkInterface{Name: "eth1", NetworkInterfaceRef: &computev1alpha1.LocalObjectReference{Name: "nic-1"}})
		}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			am := anvilMachine(unique("immutable"), full())
			if err := env.Client.Create(ctx, am); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(ctx, am) })
			tc.mutate(&am.Spec)
			err := env.Client.Update(ctx, am)
			wantInvalid(t, "changing "+tc.field, err, "spec."+tc.field+" cannot be changed on an AnvilMachine: use a new AnvilMachineTemplate")
		})
	}

	am := anvilMachine(unique("mutable"), full())
	if err := env.Client.Create(ctx, am); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, am) })
	am.Spec.Image = "registry.example/os:2"
	am.Spec.ProviderID = "anvil://default/" + am.Name
	if err := env.Client.Update(ctx, am); err != nil {
		t.Fatalf("changing the image and setting the providerID: %v", err)
	}
	am.Spec.ProviderID = "anvil://default/another"
	wantInvalid(t, "changing the providerID", env.Client.Update(ctx, am), "spec.providerID cannot be changed or removed once set")
	am.Spec.ProviderID = ""
	wantInvalid(t, "removing the providerID", env.Client.Update(ctx, am), "spec.providerID cannot be changed or removed once set")
}

func TestAnvilMachineTemplateIsNotEdited(t *testing.T) {
	installed(t)
	ctx := context.Background()
	tmpl := func(spec infrav1.AnvilMachineSpec) *infrav1.AnvilMachineTemplate {
		return &infrav1.AnvilMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: unique("tmpl"), Namespace: "default"},
			Spec:       infrav1.AnvilMachineTemplateSpec{Template: infrav1.AnvilMachineTemplateResource{Spec: spec}},
		}
	}

	withID := validSpec()
	withID.ProviderID = "anvil://default/m1"
	wantInvalid(t, "a template with a providerID", env.Client.Create(ctx, tmpl(withID)),
		"spec.template.spec.providerID must be empty: the provider sets each AnvilMachine's own")
	badArch := validSpec()
	badArch.Architecture = "x86_64"
	wantInvalid(t, "a template with an unknown architecture", env.Client.Create(ctx, tmpl(badArch)),
		`spec.template.spec.architecture: Unsupported value: "x86_64"`)

	t1 := tmpl(validSpec())
	t1.Spec.Template.ObjectMeta = clusterv1.ObjectMeta{Labels: map[string]string{"role": "worker"}}
	if err := env.Client.Create(ctx, t1); err != nil {
		t.Fatalf("creating a valid template: %v", err)
	}
	// Cluster API writes owner references and labels on templates: metadata stays writable.
	t1.Labels = map[string]string{clusterv1.ClusterNameLabel: "c1"}
	if err := env.Client.Update(ctx, t1); err != nil {
		t.Fatalf("labelling a template: %v", err)
	}
	t1.Spec.Template.Spec.Image = "registry.example/os:2"
	wantInvalid(t, "changing a template's image", env.Client.Update(ctx, t1),
		"an AnvilMachineTemplate's spec cannot be changed: create a new template")
}

func TestAnvilClusterValidation(t *testing.T) {
	installed(t)
	ctx := context.Background()
	cluster := func() *infrav1.AnvilCluster {
		return &infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Name: unique("cl"), Namespace: "default"}}
	}

	for _, tc := range []struct {
		name    string
		mutate  func(*infrav1.AnvilClusterSpec)
		message string
	}{
		{"failure domain label not a label key", func(s *infrav1.AnvilClusterSpec) { s.FailureDomainLabel = "zone name" },
			"failureDomainLabel must be a label key, such as topology.kubernetes.io/zone"},
		{"identity Secret name not a name", func(s *infrav1.AnvilClusterSpec) { s.IdentityRef = &infrav1.IdentityReference{Name: "Kube_Config"} },
			"identityRef.name must be a Secret name"},
		{"identity key not a data key", func(s *infrav1.AnvilClusterSpec) {
			s.IdentityRef = &infrav1.IdentityReference{Name: "kubeconfig", Key: "a/b"}
		}, "identityRef.key must be a Secret data key"},
		{"endpoint port out of range", func(s *infrav1.AnvilClusterSpec) {
			s.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 70000}
		}, "spec.controlPlaneEndpoint.port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster()
			tc.mutate(&c.Spec)
			wantInvalid(t, "create", env.Client.Create(ctx, c), tc.message)
		})
	}

	// An empty spec is a valid local cluster, defaulted; the provider may then fill the
	// endpoint once, and an identity may be added but not changed or removed.
	c := cluster()
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatalf("creating an empty AnvilCluster: %v", err)
	}
	if c.Spec.FailureDomainLabel != infrav1.DefaultFailureDomainLabel {
		t.Fatalf("failureDomainLabel = %q, want the default %q", c.Spec.FailureDomainLabel, infrav1.DefaultFailureDomainLabel)
	}
	c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}
	c.Spec.IdentityRef = &infrav1.IdentityReference{Name: "site-a"}
	if err := env.Client.Update(ctx, c); err != nil {
		t.Fatalf("setting the endpoint and adding an identity: %v", err)
	}
	if c.Spec.IdentityRef.Key != "value" {
		t.Fatalf("identityRef.key = %q, want the default value", c.Spec.IdentityRef.Key)
	}
	base := c.DeepCopy()

	c.Spec.ControlPlaneEndpoint.Port = 7443
	wantInvalid(t, "changing the endpoint", env.Client.Update(ctx, c), "spec.controlPlaneEndpoint cannot be changed once set")
	c = base.DeepCopy()
	c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{}
	wantInvalid(t, "clearing the endpoint", env.Client.Update(ctx, c), "spec.controlPlaneEndpoint cannot be changed once set")
	c = base.DeepCopy()
	c.Spec.IdentityRef.Name = "site-b"
	wantInvalid(t, "changing the identity", env.Client.Update(ctx, c), "spec.identityRef cannot be changed or removed once set")
	c = base.DeepCopy()
	c.Spec.IdentityRef = nil
	wantInvalid(t, "removing the identity", env.Client.Update(ctx, c), "spec.identityRef cannot be changed or removed once set")
}

// Cluster API reads the provider's objects as unstructured data at fixed paths
// (sigs.k8s.io/cluster-api internal/contract): the Go fields must serialize there, through the
// status subresource for what the provider reports.
func TestContractFieldsAreWhereClusterAPIReadsThem(t *testing.T) {
	installed(t)
	ctx := context.Background()
	am := anvilMachine(unique("contract"), validSpec())
	am.Spec.ProviderID = "anvil://default/" + am.Name
	if err := env.Client.Create(ctx, am); err != nil {
		t.Fatal(err)
	}
	am.Status.Initialization.Provisioned = new(true)
	am.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: "10.0.0.5"}}
	am.Status.FailureDomain = "zone-a"
	if err := env.Client.Status().Update(ctx, am); err != nil {
		t.Fatal(err)
	}
	ac := &infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Name: unique("contract"), Namespace: "default"},
		Spec: infrav1.AnvilClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}}}
	if err := env.Client.Create(ctx, ac); err != nil {
		t.Fatal(err)
	}
	ac.Status.Initialization.Provisioned = new(true)
	ac.Status.FailureDomains = []clusterv1.FailureDomain{{Name: "zone-a", ControlPlane: new(true)}}
	if err := env.Client.Status().Update(ctx, ac); err != nil {
		t.Fatal(err)
	}

	read := func(kind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(infrav1.GroupVersion.WithKind(kind))
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	m := read("AnvilMachine", am.Name)
	if v, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); v != am.Spec.ProviderID {
		t.Errorf("spec.providerID = %q", v)
	}
	if v, ok, _ := unstructured.NestedBool(m.Object, "status", "initialization", "provisioned"); !ok || !v {
		t.Errorf("status.initialization.provisioned = %v (present %v)", v, ok)
	}
	if v, _, _ := unstructured.NestedSlice(m.Object, "status", "addresses"); len(v) != 1 {
		t.Errorf("status.addresses = %v", v)
	}
	if v, _, _ := unstructured.NestedString(m.Object, "status", "failureDomain"); v != "zone-a" {
		t.Errorf("status.failureDomain = %q", v)
	}
	c := read("AnvilCluster", ac.Name)
	if v, ok, _ := unstructured.NestedBool(c.Object, "status", "initialization", "provisioned"); !ok || !v {
		t.Errorf("cluster status.initialization.provisioned = %v (present %v)", v, ok)
	}
	if v, _, _ := unstructured.NestedString(c.Object, "spec", "controlPlaneEndpoint", "host"); v != "10.0.0.1" {
		t.Errorf("spec.controlPlaneEndpoint.host = %q", v)
	}
	if v, _, _ := unstructured.NestedInt64(c.Object, "spec", "controlPlaneEndpoint", "port"); v != 6443 {
		t.Errorf("spec.controlPlaneEndpoint.port = %d", v)
	}
	if v, _, _ := unstructured.NestedSlice(c.Object, "status", "failureDomains"); len(v) != 1 || v[0].(map[string]any)["name"] != "zone-a" {
		t.Errorf("status.failureDomains = %v", v)
	}
}
