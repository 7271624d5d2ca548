package mapping

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// TestNewDownstreamCarriesEveryField: each field of the MRI spec the design lists lands
// where the downstream anvil reads it.
func TestNewDownstreamCarriesEveryField(t *testing.T) {
	d, err := NewDownstream(testTarget, machine())
	if err != nil {
		t.Fatal(err)
	}
	m := d.Machine
	if m.Name != testUID || m.Namespace != "site-a" || m.Labels[LabelPool] != "region-broker" || m.Labels[LabelUpstreamUID] != testUID {
		t.Fatalf("identity: %v", m.ObjectMeta)
	}
	if m.Annotations[AnnotationUpstream] != "tenant/web-1" || m.Annotations[AnnotationRecord] == "" {
		t.Fatalf("annotations: %v", m.Annotations)
	}
	gib := func(n int64) *resource.Quantity { return resource.NewQuantity(n<<30, resource.BinarySI) }
	want := computev1alpha1.MachineSpec{
		MachineClassRef:     computev1alpha1.MachineClassReference{Name: "small"},
		Image:               "registry.example/os/debian@" + testDigest,
		ImageUpdatePolicy:   computev1alpha1.ImageUpdatePolicyReimage,
		Architecture:        computev1alpha1.ArchitectureARM64,
		Emulation:           computev1alpha1.EmulationForbidden,
		MachinePoolSelector: map[string]string{"zone": "a"},
		HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "r1"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu", Operator: metav1.LabelSelectorOpIn, Values: []string{"a100"}}}},
		Tolerations:      []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoSchedule}},
		Power:            computev1alpha1.PowerOn,
		UserDataRef:      &computev1alpha1.SecretKeySelector{Name: testUID, Key: "userData"},
		Hostname:         "web-1",
		MetaData:         map[string]string{"role": "web"},
		HardwareMetaData: []computev1alpha1.HardwareMetaData{{Key: "mac0", Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"}},
		Volumes: []computev1alpha1.MachineVolume{
			{Name: "root", Image: &computev1alpha1.ImageDiskSource{Size: gib(10)}},
			{Name: "data", Ephemeral: &computev1alpha1.EphemeralVolumeSource{VolumeTemplate: computev1alpha1.VolumeTemplate{
				Spec: computev1alpha1.VolumeSpec{Size: *gib(1)}}}},
		},
		NetworkInterfaces: []computev1alpha1.MachineNetworkInterface{{Name: "eth0", Ephemeral: &computev1alpha1.EphemeralNetworkInterfaceSource{
			NetworkInterfaceTemplate: computev1alpha1.NetworkInterfaceTemplate{Spec: computev1alpha1.NetworkInterfaceSpec{
				Network: "default", MACAddress: "52:54:00:00:00:01", IPs: []string{"10.0.0.5"}}}}}},
	}
	if !equality.Semantic.DeepEqual(m.Spec, want) {
		t.Fatalf("spec =\n%+v\nwant\n%+v", m.Spec, want)
	}
	s := d.Secret
	if s == nil || s.Name != testUID || s.Namespace != "site-a" || s.Labels[LabelPool] != "region-broker" || string(s.Data["userData"]) != "#cloud-config\n" || len(s.Data) != 1 {
		t.Fatalf("secret = %+v", s)
	}
	if _, ok := s.Annotations[AnnotationRecord]; ok {
		t.Fatal("the Secret carries the record")
	}
}

func TestNewDownstreamByFormatAndPlacement(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mut   func(*mriv1alpha1.Machine)
		check func(*testing.T, Downstream)
	}{
		{"ignition", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot.Format = mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION
		},
			func(t *testing.T, d Downstream) {
				if d.Machine.Spec.IgnitionRef == nil || d.Machine.Spec.IgnitionRef.Key != "ignition" || d.Machine.Spec.UserDataRef != nil ||
					string(d.Secret.Data["ignition"]) != "#cloud-config\n" {
					t.Fatalf("%+v %+v", d.Machine.Spec, d.Secret)
				}
			}},
		{"format NONE: no Secret, no reference", func(m *mriv1alpha1.Machine) { m.Spec.FirstBoot.Format = mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE },
			func(t *testing.T, d Downstream) {
				if d.Secret != nil || d.Machine.Spec.IgnitionRef != nil || d.Machine.Spec.UserDataRef != nil || d.Machine.Spec.MetaData["role"] != "web" {
					t.Fatalf("%+v %+v", d.Machine.Spec, d.Secret)
				}
			}},
		{"no first boot at all", func(m *mriv1alpha1.Machine) { m.Spec.FirstBoot = nil },
			func(t *testing.T, d Downstream) {
				if d.Secret != nil || d.Machine.Spec.MetaData != nil || d.Machine.Spec.HardwareMetaData != nil {
					t.Fatalf("%+v %+v", d.Machine.Spec, d.Secret)
				}
			}},
		{"emulation allowed, no tolerations, no selectors", func(m *mriv1alpha1.Machine) {
			m.Spec.Placement, m.Spec.HostSelector, m.Spec.HostSelectorExpressions = nil, nil, nil
		}, func(t *testing.T, d Downstream) {
			s := d.Machine.Spec
			if s.Emulation != computev1alpha1.EmulationAllowed || s.Tolerations != nil || s.HostSelector != nil {
				t.Fatalf("%+v", s)
			}
		}},
		{"power off, image disk of the image's size", func(m *mriv1alpha1.Machine) {
			m.Spec.Power = mriv1alpha1.Power_POWER_OFF
			m.Spec.Volumes = m.Spec.Volumes[:1]
			m.Spec.Volumes[0].Source = &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{}}
		}, func(t *testing.T, d Downstream) {
			s := d.Machine.Spec
			if s.Power != computev1alpha1.PowerOff || len(s.Volumes) != 1 || s.Volumes[0].Image == nil || s.Volumes[0].Image.Size != nil {
				t.Fatalf("%+v", s)
			}
		}},
		{"a reference already pinned is pinned to the caller's digest", func(m *mriv1alpha1.Machine) {
			m.Spec.Image.Reference = "registry.example/os/debian:12@sha256:" + strings.Repeat("f", 64)
		}, func(t *testing.T, d Downstream) {
			if d.Machine.Spec.Image != "registry.example/os/debian@"+testDigest {
				t.Fatal(d.Machine.Spec.Image)
			}
		}},
		{"no upstream name labels: no upstream annotation", func(m *mriv1alpha1.Machine) { delete(m.Metadata.Labels, upstreamNameLabel) },
			func(t *testing.T, d Downstream) {
				if _, ok := d.Machine.Annotations[AnnotationUpstream]; ok {
					t.Fatal(d.Machine.Annotations)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDownstream(testTarget, machine(tc.mut))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, d)
		})
	}
}

func TestNewDownstreamRefusesWhatCannotCrossABroker(t *testing.T) {
	for _, tc := range []struct {
		name, err string
		mut       func(*mriv1alpha1.Machine)
	}{
		{"volume by handle", "names a disk of the upstream site: it cannot cross a broker", func(m *mriv1alpha1.Machine) {
			m.Spec.Volumes = append(m.Spec.Volumes, &mriv1alpha1.Volume{Name: "shared", Source: &mriv1alpha1.Volume_Handle{Handle: "tenant/shared"}})
		}},
		{"volume without a source", "no source", func(m *mriv1alpha1.Machine) {
			m.Spec.Volumes = append(m.Spec.Volumes, &mriv1alpha1.Volume{Name: "x"})
		}},
		{"reference that does not parse", "image.reference", func(m *mriv1alpha1.Machine) { m.Spec.Image.Reference = "Bad Ref" }},
		{"digest that is not one", "image.digest", func(m *mriv1alpha1.Machine) { m.Spec.Image.Digest = "sha256:xyz" }},
		{"no uid", "is not set", func(m *mriv1alpha1.Machine) { delete(m.Metadata.Labels, "anvil.dev/machine-uid") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewDownstream(testTarget, machine(tc.mut))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("NewDownstream: %v; want ErrInvalid saying %q", err, tc.err)
			}
		})
	}
}
