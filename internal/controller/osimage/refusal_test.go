package osimage_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	osimagecontroller "github.com/anvil-dev/anvil/internal/controller/osimage"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/testos"
)

// The controllers on a real apiserver and registry, without any runtime: what they refuse
// before a builder exists, and the builders they create. Builds themselves run in
// test/e2e/imagebuild_test.go.

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

// setup runs the two controllers and publishes the test OS: base (both architectures),
// amd64-only base, and the builder image; one Ready pool runs amd64 only. configure
// changes the controllers' Config before they start.
func setup(t *testing.T, configure ...func(*osimagecontroller.Config)) (both, amd64Only string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir := testos.Dir(t)
	reg := env.Registry.Host
	push := func(ref string, archs ...computev1alpha1.Architecture) string {
		sources := map[computev1alpha1.Architecture]string{}
		for _, a := range archs {
			sources[a] = filepath.Join(dir, string(a))
		}
		if _, _, err := osimage.PushDirs(ctx, ref, sources, nil); err != nil {
			t.Fatal(err)
		}
		return ref
	}
	both = push(reg+"/anvil/testos:both", "amd64", "arm64")
	amd64Only = push(reg+"/anvil/testos:amd64", "amd64")
	builder := push(reg+"/anvil/builder:test", "amd64", "arm64")

	cfg := osimagecontroller.Config{BuilderImage: builder, BuilderNetwork: "builders", Registry: reg, GuestRegistry: "10.0.2.100:5000", GuestPlainHTTP: true,
		SecretRecheck: time.Second}
	for _, c := range configure {
		c(&cfg)
	}
	startManager(t, func(mgr ctrl.Manager) error { return osimagecontroller.Setup(mgr, cfg, 2) })

	pool := &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "amd64-only"}}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pool.Status.Architectures = []computev1alpha1.Architecture{"amd64"}
	pool.Status.Execution = []computev1alpha1.ArchitectureExecution{{Architecture: "amd64", Execution: computev1alpha1.ExecutionNative}}
	pool.Status.Conditions = []metav1.Condition{{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pool) })
	return both, amd64Only
}

func recipe(name, base string, archs ...computev1alpha1.Architecture) *imagesv1alpha1.OSImage {
	return &imagesv1alpha1.OSImage{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: imagesv1alpha1.OSImageSpec{
			Base:           base,
			Architectures:  archs,
			Containerfiles: []imagesv1alpha1.Containerfile{{Content: "RUN true\n"}},
			Output:         imagesv1alpha1.OutputSpec{Repository: env.Registry.Host + "/default/" + name, Tag: "1"},
			Builder:        imagesv1alpha1.BuilderSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "builder"}},
		},
	}
}

// waitReady waits for the OSImage's Ready condition to have reason and returns its message.
func waitReady(t *testing.T, o *imagesv1alpha1.OSImage, reason string) string {
	t.Helper()
	var msg string
	eventually(t, "OSImage "+o.Name+" Ready with reason "+reason, func() (bool, string) {
		got := &imagesv1alpha1.OSImage{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, imagesv1alpha1.ConditionReady)
		if c != nil && c.Reason == reason {
			msg = c.Message
			return true, ""
		}
		return false, fmt.Sprintf("%+v", c)
	})
	return msg
}

func machinesOf(t testing.TB, name string) []computev1alpha1.Machine {
	t.Helper()
	list := &computev1alpha1.MachineList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace("default"), client.MatchingLabels{imagesv1alpha1.LabelOSImage: name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func TestBadInputIsRefusedBeforeAnyBuilder(t *testing.T) {
	both, amd64Only := setup(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "files", Namespace: "default"}, Data: map[string]string{"motd": "hi"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// arm64 runs only emulated: a builder may not use it unless the OSImage allows that.
	emulated := &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "arm64-emulated"}}
	if err := env.Client.Create(ctx, emulated); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), emulated) })
	emulated.Status.Architectures = []computev1alpha1.Architecture{"arm64"}
	emulated.Status.Execution = []computev1alpha1.ArchitectureExecution{{Architecture: "arm64", Execution: computev1alpha1.ExecutionEmulated}}
	emulated.Status.Conditions = []metav1.Condition{{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, emulated); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, reason, says string
		o                  *imagesv1alpha1.OSImage
		mutate             func(*imagesv1alpha1.OSImage)
	}{
		{"bad-step", imagesv1alpha1.ReasonInvalidRecipe, "containerfile for amd64, line 2: EXPOSE is not supported",
			recipe("bad-step", both, "amd64"), func(o *imagesv1alpha1.OSImage) {
				o.Spec.Containerfiles = append(o.Spec.Containerfiles, imagesv1alpha1.Containerfile{Architecture: "amd64", Content: "RUN true\nEXPOSE 80\n"})
			}},
		{"missing-key", imagesv1alpha1.ReasonContextMissing, `ConfigMap "files" has no key "nope"`,
			recipe("missing-key", both, "amd64"), func(o *imagesv1alpha1.OSImage) {
				o.Spec.Context = []imagesv1alpha1.ContextFile{{Path: "motd", ConfigMapKeyRef: &imagesv1alpha1.KeyReference{Name: "files", Key: "nope"}}}
			}},
		{"missing-configmap", imagesv1alpha1.ReasonContextMissing, `ConfigMap "gone" does not exist`,
			recipe("missing-configmap", both, "amd64"), func(o *imagesv1alpha1.OSImage) {
				o.Spec.Context = []imagesv1alpha1.ContextFile{{Path: "motd", ConfigMapKeyRef: &imagesv1alpha1.KeyReference{Name: "gone", Key: "motd"}}}
			}},
		{"base-lacks-arm64", imagesv1alpha1.ReasonBaseLacksArch, "has no entry for arm64",
			recipe("base-lacks-arm64", amd64Only, "amd64", "arm64"), nil},
		{"base-missing", imagesv1alpha1.ReasonBaseUnavailable, "does not exist",
			recipe("base-missing", env.Registry.Host+"/anvil/nothing:1", "amd64"), nil},
		{"base-elsewhere", imagesv1alpha1.ReasonBaseUnavailable, "the only registry builders reach",
			recipe("base-elsewhere", "registry.example/anvil/testos:1", "amd64"), nil},
		{"apt-without-proxy", imagesv1alpha1.ReasonNoPackageProxy,
			"containerfile, line 2: RUN apt-get update && apt-get install -y hello: apt fetches packages, and the builders' network offers no package proxy: set the manager's --builder-package-proxy",
			recipe("apt-without-proxy", both, "amd64"), func(o *imagesv1alpha1.OSImage) {
				o.Spec.Containerfiles = []imagesv1alpha1.Containerfile{{Content: "ENV A=b\nRUN apt-get update && apt-get install -y hello\n"}}
			}},
		{"base-not-bootable", imagesv1alpha1.ReasonBaseNotBootable, "the amd64 entry has no kernel: it is not bootable",
			recipe("base-not-bootable", pushDiskOnly(t), "amd64"), nil},
		{"arm64-only-emulated", imagesv1alpha1.ReasonNoBuilderPool, "no Ready MachinePool runs arm64 natively (builder.allowEmulated is false)",
			recipe("arm64-only-emulated", both, "amd64", "arm64"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mutate != nil {
				tc.mutate(tc.o)
			}
			if err := env.Client.Create(ctx, tc.o); err != nil {
				t.Fatal(err)
			}
			if msg := waitReady(t, tc.o, tc.reason); !strings.Contains(msg, tc.says) {
				t.Errorf("Ready message %q does not say %q", msg, tc.says)
			}
			builds := &imagesv1alpha1.OSImageBuildList{}
			if err := env.Client.List(ctx, builds, client.MatchingLabels{imagesv1alpha1.LabelOSImage: tc.o.Name}); err != nil {
				t.Fatal(err)
			}
			if len(builds.Items) != 0 || len(machinesOf(t, tc.o.Name)) != 0 {
				t.Errorf("refused inputs left %d builds and %d Machines", len(builds.Items), len(machinesOf(t, tc.o.Name)))
			}
		})
	}
}

// Valid inputs: one build, one builder Machine per architecture with its labels, owner,
// first-boot Secret and only a NIC on the builders' network.
func TestValidInputsCreateOneBuilderPerArchitecture(t *testing.T) {
	both, _ := setup(t)
	ctx := context.Background()
	o := recipe("valid", both, "amd64")
	if err := env.Client.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var ms []computev1alpha1.Machine
	for len(ms) == 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		ms = machinesOf(t, "valid")
	}
	time.Sleep(2 * time.Second) // more reconciles must not make a second builder
	ms = machinesOf(t, "valid")
	if len(ms) != 1 {
		t.Fatalf("builder Machines: %d, want 1", len(ms))
	}
	m := ms[0]
	if m.Spec.Emulation != computev1alpha1.EmulationForbidden {
		t.Errorf("builder %s: emulation %q, want Forbidden as the OSImage does not allow it", m.Name, m.Spec.Emulation)
	}
	if m.Spec.Architecture != "amd64" || m.Labels[imagesv1alpha1.LabelAttempt] != "1" || len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Kind != "OSImageBuild" {
		t.Errorf("builder %s: arch %s, labels %v, owners %v", m.Name, m.Spec.Architecture, m.Labels, m.OwnerReferences)
	}
	if len(m.Spec.NetworkInterfaces) != 1 || m.Spec.NetworkInterfaces[0].Ephemeral == nil ||
		m.Spec.NetworkInterfaces[0].Ephemeral.NetworkInterfaceTemplate.Spec.Network != "builders" {
		t.Errorf("builder NICs %+v, want one on the builders' network", m.Spec.NetworkInterfaces)
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: m.Spec.IgnitionRef.Name}, secret); err != nil {
		t.Fatalf("the builder's first-boot Secret: %v", err)
	}
	ign := string(secret.Data[computev1alpha1.DefaultIgnitionKey])
	if !strings.Contains(ign, "/etc/anvil/build-job.json") || !strings.Contains(ign, "data:;base64,") {
		t.Errorf("the builder's Ignition config does not carry the job: %s", ign)
	}
}
