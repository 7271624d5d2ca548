package metal

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// A machine's hardware references reach its FIRST boot: the runtime resolves them from the
// HardwareData of the Host it claims and writes them into the config drive before the
// claim, which Ironic then deploys. A Host whose HardwareData lacks the NIC or disk is
// passed over (host-00 lacks eth0, so the machine lands on host-01); when no Host has it
// the create is refused naming what they have, and nothing is left behind. A reimage
// resolves them again on the same Host.
func TestHardwareMetaDataReachesTheFirstBoot(t *testing.T) {
	s := newSite(t, 2)
	ctx := context.Background()
	// What inspection found, as an operator's richer inspection would report it: host-00
	// has its NIC under another name.
	setHardware(t, s.infra, "host-00", metalv1alpha1.HardwareDataSpec{
		NICs:  []metalv1alpha1.NIC{{Name: "eno1", MACAddress: "52:54:00:aa:00:00"}},
		Disks: []metalv1alpha1.Disk{{Name: "sda", SerialNumber: "SER-HOST-00"}}})
	setHardware(t, s.infra, "host-01", metalv1alpha1.HardwareDataSpec{
		NICs:  []metalv1alpha1.NIC{{Name: "eth0", MACAddress: "52:54:00:aa:00:01"}, {Name: "eth1", MACAddress: "52:54:00:aa:01:01"}},
		Disks: []metalv1alpha1.Disk{{Name: "sda", SerialNumber: "SER-HOST-01"}}})
	rt := s.mustStart(t)

	refs := func(nic string) []*mriv1alpha1.HardwareMetaData {
		return []*mriv1alpha1.HardwareMetaData{
			{Key: "mac", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: nic},
			{Key: "disk-serial", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_DISK_SERIAL_NUMBER, Name: "sda"}}
	}

	// No Host has NIC eth9: refused before any Secret is written, naming what there is.
	spec := s.spec("os")
	spec.FirstBoot.HardwareMetaData = refs("eth9")
	_, err := rt.CreateMachine(ctx, &mriv1alpha1.CreateMachineRequest{Machine: s.machine("nowhere", spec)})
	if want := `has the hardware spec.hardwareMetaData reads: hardware key "mac": no NIC "eth9" with a MAC address (it has "eno1")`; mri.ReasonOf(err) != mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY ||
		!strings.Contains(mri.MessageOf(err), want) {
		t.Fatalf("CreateMachine naming a NIC no Host has = %v, want NO_CAPACITY saying %q", err, want)
	}
	if d := s.configDrives(t); len(d) != 0 {
		t.Fatalf("the refused create left %d config drives", len(d))
	}

	spec = s.spec("os")
	spec.FirstBoot.MetaData = map[string]string{"role": "worker"}
	spec.FirstBoot.HardwareMetaData = refs("eth0")
	m := s.machine("web", spec)
	created := createMachine(t, rt.Runtime, m)
	// The retried create (the poollet's answer lost) is the same machine on the same Host.
	again := createMachine(t, rt.Runtime, m)
	if again.Metadata.Id != created.Metadata.Id {
		t.Fatalf("a repeated create gave machine %s, the first %s", again.Metadata.Id, created.Metadata.Id)
	}
	h := s.hostOf(t, created.Metadata.Id)
	if h.Name != "host-01" {
		t.Fatalf("the machine got %s, whose HardwareData has no eth0; want host-01", h.Name)
	}
	want := map[string]string{"role": "worker", "mac": "52:54:00:aa:00:01", "disk-serial": "SER-HOST-01"}
	if got := driveMeta(t, s.infra, h.Spec.ConfigDrive.Name); !maps.Equal(got, want) {
		t.Fatalf("the config drive's meta is %v, want %v", got, want)
	}
	// What Ironic was given for the first deployment of the server.
	awaitDeployed := func(op string, n int) map[string]string {
		t.Helper()
		var got map[string]string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			ds := s.deployments.of(h)
			if len(ds) < n || ds[n-1].op != op || ds[n-1].d.ConfigDrive == nil {
				return false, nil
			}
			got = stringMap(t, ds[n-1].d.ConfigDrive.MetaData["meta"])
			return true, nil
		})
		if err != nil {
			t.Fatalf("no %s of Host %s with a config drive: %v; deployments %+v", op, h.Name, err, s.deployments.of(h))
		}
		return got
	}
	if got := awaitDeployed("Provision", 1); !maps.Equal(got, want) {
		t.Fatalf("Ironic deployed a config drive whose meta is %v, want %v", got, want)
	}
	await(t, rt.Runtime, created.Metadata.Id, "ran", isRunning)

	// A reimage with another first boot resolves the references on the same Host again.
	fb := &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT, Data: []byte("#cloud-config\nhostname: two\n"),
		HardwareMetaData: []*mriv1alpha1.HardwareMetaData{{Key: "mac2", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth1"}}}
	other := &mriv1alpha1.Image{Reference: s.images["os-2"].Reference, Digest: s.images["os-2"].Digest}
	if _, err := rt.ReimageMachine(ctx, &mriv1alpha1.ReimageMachineRequest{Id: created.Metadata.Id, Image: other, FirstBoot: fb}); err != nil {
		t.Fatalf("ReimageMachine: %v", err)
	}
	if got, want := awaitDeployed("Rebuild", 2), map[string]string{"mac2": "52:54:00:aa:01:01"}; !maps.Equal(got, want) {
		t.Fatalf("the rebuild's config drive meta is %v, want %v", got, want)
	}
	// One its server cannot answer is refused, naming what the server has.
	fb.HardwareMetaData[0].Name = "eth7"
	fb.Data = []byte("#cloud-config\nhostname: three\n")
	_, err = rt.ReimageMachine(ctx, &mriv1alpha1.ReimageMachineRequest{Id: created.Metadata.Id, Image: other, FirstBoot: fb})
	if want := `no NIC "eth7" with a MAC address (it has "eth0", "eth1")`; mri.ReasonOf(err) != mriv1alpha1.ErrorReason_ERROR_REASON_INVALID || !strings.Contains(mri.MessageOf(err), want) {
		t.Fatalf("ReimageMachine naming a NIC the server lacks = %v, want INVALID saying %q", err, want)
	}
}

// setHardware replaces the spec of a Host's HardwareData (inspection has written it).
func setHardware(t *testing.T, ns, host string, spec metalv1alpha1.HardwareDataSpec) {
	t.Helper()
	hd := &metalv1alpha1.HardwareData{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: host}, hd); err != nil {
		t.Fatalf("HardwareData of %s: %v", host, err)
	}
	spec.Architecture, spec.CPU, spec.MemoryMiB = hd.Spec.Architecture, hd.Spec.CPU, hd.Spec.MemoryMiB
	hd.Spec = spec
	if err := env.Client.Update(context.Background(), hd); err != nil {
		t.Fatal(err)
	}
}

// driveMeta is the "meta" of a config drive Secret's meta_data.
func driveMeta(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	var md struct {
		Meta map[string]string `json:"meta"`
	}
	if err := json.Unmarshal(s.Data["meta_data"], &md); err != nil {
		t.Fatal(err)
	}
	return md.Meta
}

func stringMap(t *testing.T, v any) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch m := v.(type) {
	case map[string]string:
		return m
	case map[string]any:
		for k, x := range m {
			out[k] = fmt.Sprint(x)
		}
	default:
		t.Fatalf("meta is %T %v, not a map", v, v)
	}
	return out
}
