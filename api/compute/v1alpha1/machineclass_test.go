package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

func machineClass(name string, caps map[corev1.ResourceName]string, arch computev1alpha1.Architecture) *computev1alpha1.MachineClass {
	mc := &computev1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: name},
		Capabilities: corev1.ResourceList{},
		Architecture: arch,
	}
	for k, v := range caps {
		mc.Capabilities[k] = resource.MustParse(v)
	}
	return mc
}

func TestMachineClassRoundTrip(t *testing.T) {
	ctx := context.Background()
	want := machineClass("gpu-round-trip", map[corev1.ResourceName]string{
		"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2",
	}, computev1alpha1.ArchitectureARM64)
	if err := env.Client.Create(ctx, want); err != nil {
		t.Fatalf("creating a valid MachineClass: %v", err)
	}
	got := &computev1alpha1.MachineClass{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: want.Name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Architecture != computev1alpha1.ArchitectureARM64 {
		t.Errorf("architecture = %q, want arm64", got.Architecture)
	}
	for name, q := range want.Capabilities {
		if have := got.Capabilities[name]; have.Cmp(q) != 0 {
			t.Errorf("capability %s = %s, want %s", name, have.String(), q.String())
		}
	}
	if len(got.Capabilities) != 3 {
		t.Errorf("capabilities = %v, want exactly cpu, memory and nvidia.com/gpu", got.Capabilities)
	}
}

func TestMachineClassRejectsInvalid(t *testing.T) {
	cases := []struct {
		name    string
		class   *computev1alpha1.MachineClass
		message string // a part of the apiserver's message that tells the user what to fix
	}{{
		name:    "negative cpu",
		class:   machineClass("negative-cpu", map[corev1.ResourceName]string{"cpu": "-1", "memory": "1Gi"}, ""),
		message: "every capability must be a positive quantity",
	}, {
		name:    "zero memory",
		class:   machineClass("zero-memory", map[corev1.ResourceName]string{"cpu": "1", "memory": "0"}, ""),
		message: "every capability must be a positive quantity",
	}, {
		name:    "unknown architecture",
		class:   machineClass("sparc", map[corev1.ResourceName]string{"cpu": "1", "memory": "1Gi"}, "sparc"),
		message: `Unsupported value: "sparc"`,
	}, {
		name:    "memory missing",
		class:   machineClass("no-memory", map[corev1.ResourceName]string{"cpu": "1"}, ""),
		message: "capabilities must set both cpu and memory",
	}, {
		name:    "extended resource without a domain",
		class:   machineClass("bare-gpu", map[corev1.ResourceName]string{"cpu": "1", "memory": "1Gi", "gpu": "1"}, ""),
		message: "capability names are cpu, memory, or an extended resource with a domain prefix",
	}, {
		name:    "name not a DNS label",
		class:   machineClass("small.v2", map[corev1.ResourceName]string{"cpu": "1", "memory": "1Gi"}, ""),
		message: "metadata.name must be a DNS label",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), tc.class)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create returned %v, want an Invalid error", err)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q does not say %q", err.Error(), tc.message)
			}
		})
	}
}

func TestMachineClassCapabilitiesAreImmutable(t *testing.T) {
	ctx := context.Background()
	mc := machineClass("immutable", map[corev1.ResourceName]string{"cpu": "2", "memory": "2Gi"}, "")
	if err := env.Client.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	mc.Capabilities[corev1.ResourceCPU] = resource.MustParse("4")
	err := env.Client.Update(ctx, mc)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "capabilities are immutable") {
		t.Fatalf("changing capabilities returned %v, want an Invalid error saying capabilities are immutable", err)
	}
	// Labels are not capabilities: they stay editable.
	mc.Capabilities[corev1.ResourceCPU] = resource.MustParse("2")
	mc.Labels = map[string]string{"tier": "general"}
	if err := env.Client.Update(ctx, mc); err != nil {
		t.Fatalf("changing only labels: %v", err)
	}
}
