package metal

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

var testImage = &metalv1alpha1.HostImage{URL: "http://127.0.0.1:1/images/sha256/aa", Checksum: "sha256:" + strings.Repeat("a", 64), Format: metalv1alpha1.ImageFormatRaw}

type hostOpt func(*metalv1alpha1.Host)

// claimed is a Host claimed with testImage, not yet picked up by the Host controller.
func claimed(opts ...hostOpt) *metalv1alpha1.Host {
	h := &metalv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Name: "h1", Namespace: "infra", Annotations: map[string]string{}},
		Spec: metalv1alpha1.HostSpec{
			Architecture: computev1alpha1.ArchitectureAMD64, Online: true, Image: testImage.DeepCopy(),
			ConsumerRef: &metalv1alpha1.ConsumerReference{Namespace: "tenant", Name: "m", UID: "u"},
		},
		Status: metalv1alpha1.HostStatus{ProvisioningState: metalv1alpha1.StateAvailable, OperationalStatus: metalv1alpha1.OperationalOK,
			PowerState: metalv1alpha1.PowerOff},
	}
	for _, o := range opts {
		o(h)
	}
	return h
}

func state(s metalv1alpha1.ProvisioningState) hostOpt {
	return func(h *metalv1alpha1.Host) { h.Status.ProvisioningState = s }
}

func power(p metalv1alpha1.PowerState) hostOpt {
	return func(h *metalv1alpha1.Host) { h.Status.PowerState = p }
}

// provisionedOn is provisioned with the wanted image and powered on.
func provisionedOn(h *metalv1alpha1.Host) {
	h.Status.ProvisioningState, h.Status.PowerState, h.Status.Image = metalv1alpha1.StateProvisioned, metalv1alpha1.PowerOn, testImage.DeepCopy()
}

func failing(reason string) hostOpt {
	return func(h *metalv1alpha1.Host) {
		h.Status.OperationalStatus = metalv1alpha1.OperationalError
		h.Status.LastError = "redfish://10.0.0.9/redfish/v1/Systems/1 in namespace infra: 401"
		h.Status.Conditions = []metav1.Condition{{Type: metalv1alpha1.ConditionProvisioned, Status: metav1.ConditionFalse, Reason: reason}}
	}
}

// powerFailing: the Host controller's last failures attempts to switch the server to
// target failed (0: the first attempt is under way).
func powerFailing(target metalv1alpha1.PowerState, failures int32) hostOpt {
	return func(h *metalv1alpha1.Host) {
		h.Status.PowerChange = &metalv1alpha1.PowerChange{Target: target, Attempts: failures + 1, Failures: failures}
		if failures > 0 {
			h.Status.OperationalStatus = metalv1alpha1.OperationalError
			h.Status.LastError = "PowerOn failed (3 in a row; next attempt at ...): redfish://10.0.0.9/redfish/v1/Systems/1 in namespace infra: 500"
			h.Status.Conditions = []metav1.Condition{{Type: metalv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: metalv1alpha1.ReasonPowerChangeFailed, Message: h.Status.LastError}}
		}
	}
}

func offline(h *metalv1alpha1.Host) { h.Spec.Online = false }

func TestObserve(t *testing.T) {
	on := &mriv1alpha1.MachineSpec{Power: mriv1alpha1.Power_POWER_ON}
	off := &mriv1alpha1.MachineSpec{Power: mriv1alpha1.Power_POWER_OFF}
	const (
		pending     = mriv1alpha1.MachineState_MACHINE_STATE_PENDING
		run         = mriv1alpha1.MachineState_MACHINE_STATE_RUNNING
		shut        = mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN
		terminating = mriv1alpha1.MachineState_MACHINE_STATE_TERMINATING
		terminated  = mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED
	)
	for _, tc := range []struct {
		name    string
		h       *metalv1alpha1.Host
		spec    *mriv1alpha1.MachineSpec
		deleted bool
		state   mriv1alpha1.MachineState
		settled bool
		reason  string // of the last condition
	}{
		{"claimed, not picked up", claimed(), on, false, pending, false, "Waiting"},
		{"provisioning", claimed(state(metalv1alpha1.StateProvisioning)), on, false, pending, false, "Provisioning"},
		{"provisioning failed", claimed(state(metalv1alpha1.StateProvisioning), failing(metalv1alpha1.ReasonImageChecksumMismatch)), on, false, pending, false, metalv1alpha1.ReasonImageChecksumMismatch},
		{"unknown failure", claimed(state(metalv1alpha1.StateProvisioning), failing("Weird")), on, false, pending, false, "ServerError"},
		{"provisioned, on", claimed(provisionedOn), on, false, run, true, "On"},
		{"provisioned, on, asked off", claimed(provisionedOn), off, false, run, false, "Switching"},
		{"provisioned, off", claimed(provisionedOn, power(metalv1alpha1.PowerOff)), off, false, shut, true, "Off"},
		{"provisioned, off, asked on", claimed(provisionedOn, power(metalv1alpha1.PowerOff)), on, false, shut, false, "Switching"},
		{"provisioned, power unknown", claimed(provisionedOn, power(metalv1alpha1.PowerUnknown)), on, false, run, false, "Switching"},
		{"provisioned, power change failed", claimed(provisionedOn, power(metalv1alpha1.PowerOff), failing(metalv1alpha1.ReasonPowerChangeFailed)), on, false, shut, false, metalv1alpha1.ReasonPowerChangeFailed},
		// A server reported Off whose power-on keeps failing was Running on its
		// Machine, the status never settling on anything else. Now it settles on Shutdown,
		// saying its power fails.
		{"provisioned, power on keeps failing", claimed(provisionedOn, power(metalv1alpha1.PowerOff), powerFailing(metalv1alpha1.PowerOn, 3)), on, false, shut, true,
			computev1alpha1.ReasonPowerChangeFailed},
		{"provisioned, power off keeps failing", claimed(provisionedOn, offline, powerFailing(metalv1alpha1.PowerOff, 1)), off, false, run, true,
			computev1alpha1.ReasonPowerChangeFailed},
		{"provisioned, power unknown and failing", claimed(provisionedOn, power(metalv1alpha1.PowerUnknown), powerFailing(metalv1alpha1.PowerOn, 2)), on, false, run, true,
			computev1alpha1.ReasonPowerChangeFailed},
		{"the first attempt under way is no failure", claimed(provisionedOn, power(metalv1alpha1.PowerOff), powerFailing(metalv1alpha1.PowerOn, 0)), on, false, shut, false, "Switching"},
		// Not settled on a failure that is not this machine's spec's: the Host's error shows.
		{"a failing record of the other power is no failure", claimed(provisionedOn, power(metalv1alpha1.PowerOff), powerFailing(metalv1alpha1.PowerOff, 2)), on, false, shut, false, metalv1alpha1.ReasonPowerChangeFailed},
		{"the machine asked off, the Host not yet", claimed(provisionedOn, power(metalv1alpha1.PowerOff), powerFailing(metalv1alpha1.PowerOn, 2)), off, false, shut, false, metalv1alpha1.ReasonPowerChangeFailed},
		{"provisioned with another image", claimed(provisionedOn, func(h *metalv1alpha1.Host) { h.Status.Image.Checksum = "sha256:" + strings.Repeat("b", 64) }), on, false, pending, false, "Waiting"},
		{"same image from another URL", claimed(provisionedOn, func(h *metalv1alpha1.Host) { h.Status.Image.URL = "http://elsewhere/x" }), on, false, run, true, "On"},
		{"detached keeps running", claimed(provisionedOn, func(h *metalv1alpha1.Host) { h.Spec.Detached = true }), on, false, run, true, "On"},
		{"deleted, still provisioned", claimed(provisionedOn), on, true, terminating, false, "Deprovisioning"},
		{"deleted, deprovisioning", claimed(state(metalv1alpha1.StateDeprovisioning)), on, true, terminating, false, "Deprovisioning"},
		{"server retired", claimed(provisionedOn, func(h *metalv1alpha1.Host) { now := metav1.Now(); h.DeletionTimestamp = &now }), on, false, terminated, true, "ServerRetired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &record{ID: "pool-1", Generation: 1}
			if tc.deleted {
				rec.DeletedAt = 1
			}
			o := observe(tc.h, rec, tc.spec)
			if o.state != tc.state || o.settled != tc.settled {
				t.Fatalf("state %s settled %v, want %s %v", o.state, o.settled, tc.state, tc.settled)
			}
			last := o.conditions[len(o.conditions)-1]
			if last.Reason != tc.reason {
				t.Fatalf("conditions %v: want the last with reason %s", o.conditions, tc.reason)
			}
			if failing := last.Type == computev1alpha1.ConditionServerPowerFailing; failing != (strings.Contains(tc.name, "failing") && tc.settled) || failing && !last.Status {
				t.Fatalf("conditions %v: ServerPowerFailing (True) only while the power keeps failing", o.conditions)
			}
			for _, c := range o.conditions {
				if strings.Contains(c.Message, "redfish") || strings.Contains(c.Message, "infra") || strings.Contains(c.Message, "h1") {
					t.Errorf("condition %v tells the tenant about the Host", c)
				}
			}
		})
	}
}

func TestMachineStatusAttachments(t *testing.T) {
	spec := &mriv1alpha1.MachineSpec{Power: mriv1alpha1.Power_POWER_ON, Hostname: "web-1",
		Volumes:           []*mriv1alpha1.Volume{{Name: "root", Source: &mriv1alpha1.Volume_ImageDisk{ImageDisk: &mriv1alpha1.ImageDisk{}}}},
		NetworkInterfaces: []*mriv1alpha1.NetworkInterface{{Name: "eth0"}, {Name: "eth1"}}}
	rec := &record{ID: "pool-1", Generation: 1}
	st, _ := machineStatus(claimed(), rec, spec)
	if len(st.Volumes) != 1 || st.Volumes[0].State != mriv1alpha1.AttachState_ATTACH_STATE_PENDING || len(st.NetworkInterfaces) != 2 {
		t.Fatalf("before provisioning: volumes %v, nics %v", st.Volumes, st.NetworkInterfaces)
	}
	h := claimed(provisionedOn)
	h.Annotations[AnnotationReboot] = "r1"
	h.Status.RebootToken = "r1" // the Host controller carried it out
	st, settled := machineStatus(h, rec, spec)
	if !settled || st.Volumes[0].State != mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED || st.NetworkInterfaces[1].State != mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED {
		t.Fatalf("provisioned: settled %v, volumes %v, nics %v", settled, st.Volumes, st.NetworkInterfaces)
	}
	if st.RebootToken != "r1" || st.Architecture != mriv1alpha1.Architecture_ARCHITECTURE_AMD64 || len(st.Addresses) != 1 || st.Addresses[0].Address != "web-1" {
		t.Fatalf("status %v", st)
	}
}

func TestMachineStatusSSHAddressFromTheHost(t *testing.T) {
	spec := &mriv1alpha1.MachineSpec{Power: mriv1alpha1.Power_POWER_ON}
	for _, tc := range []struct{ annotation, want string }{
		{"127.0.0.1:2201", "127.0.0.1:2201"},
		{"jump.example:22", "jump.example:22"},
		{"[::1]:2222", "[::1]:2222"},
		{"", ""},
		{"127.0.0.1", ""},      // no port
		{":22", ""},            // no host
		{"127.0.0.1:0", ""},    // no port to reach
		{"127.0.0.1:http", ""}, // not a number
		{"127.0.0.1:70000", ""},
	} {
		h := claimed(provisionedOn)
		h.Annotations[metalv1alpha1.AnnotationSSHAddress] = tc.annotation
		st, _ := machineStatus(h, &record{ID: "pool-1", Generation: 1}, spec)
		got := ""
		for _, a := range st.Addresses {
			if a.Type == "SSH" {
				got = a.Address
			}
		}
		if got != tc.want {
			t.Errorf("annotation %q: SSH address %q, want %q", tc.annotation, got, tc.want)
		}
	}
}

func TestReleased(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    *metalv1alpha1.Host
		want bool
	}{
		{"image still wanted", claimed(), false},
		{"deprovisioning", claimed(state(metalv1alpha1.StateDeprovisioning), func(h *metalv1alpha1.Host) { h.Spec.Image = nil }), false},
		{"available, image still recorded", claimed(func(h *metalv1alpha1.Host) { h.Spec.Image, h.Status.Image = nil, testImage }), false},
		{"available and clean", claimed(func(h *metalv1alpha1.Host) { h.Spec.Image = nil }), true},
	} {
		if got := released(tc.h); got != tc.want {
			t.Errorf("%s: released = %v, want %v", tc.name, got, tc.want)
		}
	}
}
