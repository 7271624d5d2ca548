package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func validMachine(name string) *computev1alpha1.Machine {
	return &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: computev1alpha1.MachineSpec{
			MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"},
			Image:           "registry.example/os:1",
		},
	}
}

func TestMachineDefaultsPowerOn(t *testing.T) {
	ctx := context.Background()
	m := validMachine("defaults")
	m.Spec.Volumes = []computev1alpha1.MachineVolume{
		{Name: "root", Image: &computev1alpha1.ImageDiskSource{}},
		{Name: "scratch", EmptyDisk: &computev1alpha1.EmptyDiskSource{Size: resource.MustParse("1Gi")}},
	}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatalf("creating a valid Machine: %v", err)
	}
	got := &computev1alpha1.Machine{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Power != computev1alpha1.PowerOn {
		t.Fatalf("power = %q, want the default On", got.Spec.Power)
	}
	if got.Spec.Emulation != computev1alpha1.EmulationAllowed {
		t.Fatalf("emulation = %q, want the default Allowed", got.Spec.Emulation)
	}
}

func TestMachineRejectsInvalid(t *testing.T) {
	size := func(s string) resource.Quantity { return resource.MustParse(s) }
	cases := []struct {
		name    string
		mutate  func(*computev1alpha1.Machine)
		message string
	}{
		{"unknown power", func(m *computev1alpha1.Machine) { m.Spec.Power = "Maybe" },
			`spec.power: Unsupported value: "Maybe"`},
		{"unknown emulation", func(m *computev1alpha1.Machine) { m.Spec.Emulation = "Sometimes" },
			`spec.emulation: Unsupported value: "Sometimes"`},
		{"both first-boot configs", func(m *computev1alpha1.Machine) {
			m.Spec.IgnitionRef = &computev1alpha1.SecretKeySelector{Name: "ign"}
			m.Spec.UserDataRef = &computev1alpha1.SecretKeySelector{Name: "ud"}
		}, "set ignitionRef or userDataRef, not both"},
		{"duplicate volume names", func(m *computev1alpha1.Machine) {
			m.Spec.Volumes = []computev1alpha1.MachineVolume{
				{Name: "data", EmptyDisk: &computev1alpha1.EmptyDiskSource{Size: size("1Gi")}},
				{Name: "data", EmptyDisk: &computev1alpha1.EmptyDiskSource{Size: size("2Gi")}},
			}
		}, `spec.volumes[1]: Duplicate value: {"name":"data"}`},
		{"duplicate NIC names", func(m *computev1alpha1.Machine) {
			m.Spec.NetworkInterfaces = []computev1alpha1.MachineNetworkInterface{
				{Name: "eth0", NetworkInterfaceRef: &computev1alpha1.LocalObjectReference{Name: "a"}},
				{Name: "eth0", NetworkInterfaceRef: &computev1alpha1.LocalObjectReference{Name: "b"}},
			}
		}, `spec.networkInterfaces[1]: Duplicate value`},
		{"two root volumes", func(m *computev1alpha1.Machine) {
			m.Spec.Volumes = []computev1alpha1.MachineVolume{
				{Name: "root", Image: &computev1alpha1.ImageDiskSource{}},
				{Name: "root2", Image: &computev1alpha1.ImageDiskSource{}},
			}
		}, "at most one volume may be the root disk"},
		{"volume with two sources", func(m *computev1alpha1.Machine) {
			m.Spec.Volumes = []computev1alpha1.MachineVolume{{Name: "x", Image: &computev1alpha1.ImageDiskSource{},
				VolumeRef: &computev1alpha1.LocalObjectReference{Name: "v"}}}
		}, "each volume sets exactly one of image, emptyDisk, volumeRef or ephemeral"},
		{"zero empty disk", func(m *computev1alpha1.Machine) {
			m.Spec.Volumes = []computev1alpha1.MachineVolume{{Name: "x", EmptyDisk: &computev1alpha1.EmptyDiskSource{Size: size("0")}}}
		}, "emptyDisk.size must be greater than zero"},
		{"negative ephemeral volume", func(m *computev1alpha1.Machine) {
			m.Spec.Volumes = []computev1alpha1.MachineVolume{{Name: "x", Ephemeral: &computev1alpha1.EphemeralVolumeSource{
				VolumeTemplate: computev1alpha1.VolumeTemplate{Spec: computev1alpha1.VolumeSpec{Size: size("-1Gi")}}}}}
		}, "size must be greater than zero"},
		{"unknown architecture", func(m *computev1alpha1.Machine) { m.Spec.Architecture = "x86_64" },
			`spec.architecture: Unsupported value: "x86_64"`},
		{"class name not a DNS label", func(m *computev1alpha1.Machine) { m.Spec.MachineClassRef.Name = "Small_Class" },
			"machineClassRef.name must be a DNS label"},
		{"NIC with no source", func(m *computev1alpha1.Machine) {
			m.Spec.NetworkInterfaces = []computev1alpha1.MachineNetworkInterface{{Name: "eth0"}}
		}, "each network interface sets exactly one of networkInterfaceRef or ephemeral"},
		{"hostname not RFC 1123", func(m *computev1alpha1.Machine) { m.Spec.Hostname = "Web_1" }, "hostname must be lowercase letters, digits"},
		{"hostname with a line break", func(m *computev1alpha1.Machine) { m.Spec.Hostname = "vm\ninstance-id: x" }, "hostname must be lowercase letters"},
		{"hostname too long", func(m *computev1alpha1.Machine) { m.Spec.Hostname = strings.Repeat("a", 64) }, "spec.hostname: Too long"},
		{"metaData key of the runtime", func(m *computev1alpha1.Machine) { m.Spec.MetaData = map[string]string{"local-hostname": "evil"} },
			"metaData keys instance-id, uuid, name, hostname and local-hostname are written by the runtime"},
		{"metaData key of the runtime, other case", func(m *computev1alpha1.Machine) { m.Spec.MetaData = map[string]string{"Instance-ID": "x"} },
			"are written by the runtime and cannot be set here"},
		{"metaData key with a line break", func(m *computev1alpha1.Machine) { m.Spec.MetaData = map[string]string{"a\ninstance-id": "x"} },
			"metaData keys must be letters, digits, '-', '_' and '.'"},
		{"metaData key with a colon", func(m *computev1alpha1.Machine) { m.Spec.MetaData = map[string]string{"a: b": "x"} },
			"metaData keys must be letters"},
		{"metaData key too long", func(m *computev1alpha1.Machine) { m.Spec.MetaData = map[string]string{strings.Repeat("k", 64): "x"} },
			"at most 63 characters"},
		{"metaData value too long", func(m *computev1alpha1.Machine) { m.Spec.MetaData = map[string]string{"k": strings.Repeat("v", 1025)} },
			"metaData values must be at most 1024 characters"},
		{"metaData of 33 keys", func(m *computev1alpha1.Machine) {
			m.Spec.MetaData = map[string]string{}
			for i := range 33 {
				m.Spec.MetaData[fmt.Sprint("k", i)] = "v"
			}
		}, "spec.metaData: Too many: 33: must have at most 32 items"},
		{"hardwareMetaData field left out", func(m *computev1alpha1.Machine) {
			m.Spec.HardwareMetaData = []computev1alpha1.HardwareMetaData{{Key: "mac", Name: "eth0"}}
		}, `spec.hardwareMetaData[0].field: Unsupported value: ""`},
		{"hardwareMetaData field unknown", func(m *computev1alpha1.Machine) {
			m.Spec.HardwareMetaData = []computev1alpha1.HardwareMetaData{{Key: "sn", Field: "SystemSerial", Name: "x"}}
		}, `Unsupported value: "SystemSerial"`},
		{"hardwareMetaData without a name", func(m *computev1alpha1.Machine) {
			m.Spec.HardwareMetaData = []computev1alpha1.HardwareMetaData{{Key: "mac", Field: computev1alpha1.HardwareNICMACAddress}}
		}, "spec.hardwareMetaData[0].name"},
		{"hardwareMetaData key of the runtime", func(m *computev1alpha1.Machine) {
			m.Spec.HardwareMetaData = []computev1alpha1.HardwareMetaData{{Key: "UUID", Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"}}
		}, "hardwareMetaData keys instance-id, uuid, name, hostname and local-hostname are written by the runtime"},
		{"hardwareMetaData key with a colon", func(m *computev1alpha1.Machine) {
			m.Spec.HardwareMetaData = []computev1alpha1.HardwareMetaData{{Key: "a: b", Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"}}
		}, "hardwareMetaData keys must be letters, digits"},
		{"hardwareMetaData key also in metaData", func(m *computev1alpha1.Machine) {
			m.Spec.MetaData = map[string]string{"mac": "x"}
			m.Spec.HardwareMetaData = []computev1alpha1.HardwareMetaData{{Key: "mac", Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"}}
		}, "a hardwareMetaData key is also a metaData key"},
		{"metaData and hardwareMetaData of 33 keys together", func(m *computev1alpha1.Machine) {
			m.Spec.MetaData = map[string]string{}
			for i := range 30 {
				m.Spec.MetaData[fmt.Sprint("k", i)] = "v"
			}
			for i := range 3 {
				m.Spec.HardwareMetaData = append(m.Spec.HardwareMetaData,
					computev1alpha1.HardwareMetaData{Key: fmt.Sprint("mac", i), Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"})
			}
		}, "metaData and hardwareMetaData have more than 32 keys together"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := validMachine("invalid")
			tc.mutate(m)
			err := env.Client.Create(context.Background(), m)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create returned %v, want an Invalid error", err)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q does not say %q", err.Error(), tc.message)
			}
		})
	}
}

func TestMachinePoolRefCannotChangeOnceBound(t *testing.T) {
	ctx := context.Background()
	m := validMachine("pinned")
	m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: "pool-a"}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Spec.MachinePoolRef.Name = "pool-b"
	err := env.Client.Update(ctx, m)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "machinePoolRef cannot be changed once the Machine is bound") {
		t.Fatalf("moving a bound Machine returned %v, want an Invalid error saying machinePoolRef cannot change", err)
	}
}

// What a bound Machine runs on is fixed: its class, architecture, volumes and NICs are
// refused with a message naming the field, the pool and what to do instead. An unbound
// Machine may still change them, and a bound one its image, power and first-boot config.
func TestBoundMachineRefusesChangesItsPoolWouldIgnore(t *testing.T) {
	ctx := context.Background()
	size := resource.MustParse("1Gi")
	for _, tc := range []struct {
		field  string
		mutate func(*computev1alpha1.MachineSpec)
	}{
		{"machineClassRef", func(s *computev1alpha1.MachineSpec) { s.MachineClassRef.Name = "large" }},
		{"architecture", func(s *computev1alpha1.MachineSpec) { s.Architecture = computev1alpha1.ArchitectureARM64 }},
		{"volumes", func(s *computev1alpha1.MachineSpec) {
			s.Volumes = append(s.Volumes, computev1alpha1.MachineVolume{Name: "scratch", EmptyDisk: &computev1alpha1.EmptyDiskSource{Size: size}})
		}},
		{"volumes", func(s *computev1alpha1.MachineSpec) { s.Volumes = nil }},
		{"volumes", func(s *computev1alpha1.MachineSpec) { s.Volumes[0].EmptyDisk.Size = resource.MustParse("2Gi") }},
		{"hostname", func(s *computev1alpha1.MachineSpec) { s.Hostname = "other" }},
		{"networkInterfaces", func(s *computev1alpha1.MachineSpec) {
			s.NetworkInterfaces = append(s.NetworkInterfaces, computev1alpha1.MachineNetworkInterface{Name: "eth1", NetworkInterfaceRef: &computev1alpha1.LocalObjectReference{Name: "nic-1"}})
		}},
	} {
		newMachine := func(name string, bound bool) *computev1alpha1.Machine {
			m := validMachine(name)
			m.Spec.Architecture = computev1alpha1.ArchitectureAMD64
			m.Spec.Volumes = []computev1alpha1.MachineVolume{{Name: "data", EmptyDisk: &computev1alpha1.EmptyDiskSource{Size: size}}}
			if bound {
				m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: "pool-a"}
			}
			if err := env.Client.Create(ctx, m); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(ctx, m) })
			return m
		}
		free := newMachine("free-"+strings.ToLower(tc.field)+"-"+fmt.Sprint(time.Now().UnixNano()), false)
		tc.mutate(&free.Spec)
		if err := env.Client.Update(ctx, free); err != nil {
			t.Errorf("changing %s of an unbound Machine: %v", tc.field, err)
		}
		bound := newMachine("bound-"+strings.ToLower(tc.field)+"-"+fmt.Sprint(time.Now().UnixNano()), true)
		tc.mutate(&bound.Spec)
		err := env.Client.Update(ctx, bound)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field+" cannot be changed once the Machine is bound (to pool pool-a)") {
			t.Errorf("changing %s of a bound Machine: %v, want Invalid naming the field and the pool", tc.field, err)
		}
	}
	m := validMachine("bound-mutable")
	m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: "pool-a"}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Spec.Image = "registry.example/os:2"
	m.Spec.Power = computev1alpha1.PowerOff
	m.Spec.UserDataRef = &computev1alpha1.SecretKeySelector{Name: "user-data"}
	m.Spec.MetaData = map[string]string{"anvil-index": "1"}
	if err := env.Client.Update(ctx, m); err != nil {
		t.Errorf("changing image, power, user data and metadata of a bound Machine: %v", err)
	}
}

// An unknown power value written as raw JSON (not through the typed client) is refused too:
// a missing or misspelled field never means "power on" by accident.
func TestMachineRejectsLowercasePowerFromYAML(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "compute.anvil.dev/v1alpha1", "kind": "Machine",
		"metadata": map[string]any{"name": "lowercase", "namespace": "default"},
		"spec":     map[string]any{"machineClassRef": map[string]any{"name": "small"}, "image": "r/os:1", "power": "on"},
	}}
	err := env.Client.Create(context.Background(), u)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `supported values: "On", "Off"`) {
		t.Fatalf("power: on returned %v, want an Invalid error listing On and Off", err)
	}
}

// Metadata at its bounds, with values a YAML or JSON writer must quote, is accepted: the
// runtimes quote values; only keys are held to a charset.
func TestMachineAcceptsMetaDataAtItsBounds(t *testing.T) {
	m := validMachine("metadata-bounds")
	m.Spec.Hostname = "workers-0.example"
	m.Spec.MetaData = map[string]string{strings.Repeat("k", 63): strings.Repeat("é", 1024), "rack": "a: b\ninstance-id: x", "A_1.b-2": ""}
	for i := range 29 {
		m.Spec.MetaData[fmt.Sprint("k", i)] = "v"
	}
	if err := env.Client.Create(context.Background(), m); err != nil {
		t.Fatalf("creating a Machine with 32 metadata keys at their bounds: %v", err)
	}
}

// Hardware references share metadata's 32 keys: 30 values and 2 references are accepted.
func TestMachineAcceptsHardwareMetaDataWithinTheSharedBound(t *testing.T) {
	m := validMachine("hardware-metadata")
	m.Spec.MetaData = map[string]string{}
	for i := range 30 {
		m.Spec.MetaData[fmt.Sprint("k", i)] = "v"
	}
	m.Spec.HardwareMetaData = []computev1alpha1.HardwareMetaData{
		{Key: "mac", Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"},
		{Key: "disk-serial", Field: computev1alpha1.HardwareDiskSerialNumber, Name: "sda"},
	}
	if err := env.Client.Create(context.Background(), m); err != nil {
		t.Fatalf("creating a Machine with 30 metadata keys and 2 hardware references: %v", err)
	}
}
