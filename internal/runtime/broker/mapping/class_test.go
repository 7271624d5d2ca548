package mapping

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

func TestMatchClass(t *testing.T) {
	spec := &mriv1alpha1.MachineSpec{Class: "small", Architecture: mriv1alpha1.Architecture_ARCHITECTURE_AMD64,
		Resources: &mriv1alpha1.Resources{MilliCpu: 2000, MemoryBytes: 4 << 30, Extended: map[string]int64{"example.com/gpu": 1}}}
	class := func(mut func(*computev1alpha1.MachineClass)) *computev1alpha1.MachineClass {
		c := &computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Capabilities: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), "example.com/gpu": resource.MustParse("1")}}
		if mut != nil {
			mut(c)
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		class *computev1alpha1.MachineClass
		err   string
	}{
		{"same size, written otherwise", class(func(c *computev1alpha1.MachineClass) {
			c.Capabilities[corev1.ResourceCPU] = resource.MustParse("2000m")
		}), ""},
		{"same size, the class of the machine's architecture", class(func(c *computev1alpha1.MachineClass) { c.Architecture = "amd64" }), ""},
		{"missing", nil, "class small does not exist downstream"},
		{"less cpu", class(func(c *computev1alpha1.MachineClass) { c.Capabilities[corev1.ResourceCPU] = resource.MustParse("1") }), "cpu 2000m upstream, 1000m downstream"},
		{"more memory", class(func(c *computev1alpha1.MachineClass) {
			c.Capabilities[corev1.ResourceMemory] = resource.MustParse("8Gi")
		}), "memory 4294967296 bytes upstream, 8589934592 downstream"},
		{"no gpu", class(func(c *computev1alpha1.MachineClass) { delete(c.Capabilities, "example.com/gpu") }), "example.com/gpu 1 upstream, 0 downstream"},
		{"an extra resource", class(func(c *computev1alpha1.MachineClass) { c.Capabilities["example.com/fpga"] = resource.MustParse("1") }), "example.com/fpga 0 upstream, 1 downstream"},
		{"another architecture", class(func(c *computev1alpha1.MachineClass) { c.Architecture = "arm64" }), "limited to arm64, the machine is amd64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := MatchClass(tc.class, spec)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("MatchClass: %v; want ErrInvalid saying %q", err, tc.err)
			}
		})
	}
}
