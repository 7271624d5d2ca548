package view

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

func TestPoolOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pool  computev1alpha1.MachinePool
		check func(*testing.T, Pool)
	}{
		{"kind from the providerID's scheme; each architecture with how it runs", computev1alpha1.MachinePool{
			ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: computev1alpha1.MachinePoolSpec{ProviderID: "qemu://host-7"},
			Status: computev1alpha1.MachinePoolStatus{Architectures: []computev1alpha1.Architecture{"amd64", "arm64"},
				Execution: []computev1alpha1.ArchitectureExecution{{Architecture: "arm64", Execution: computev1alpha1.ExecutionEmulated, Reason: "tcg"},
					{Architecture: "amd64", Execution: computev1alpha1.ExecutionNative}},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
				Allocated:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				Conditions:  []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "RuntimeReachable"}}}},
			func(t *testing.T, p Pool) {
				want := []PoolArch{{"amd64", "Native", ""}, {"arm64", "Emulated", "tcg"}}
				if p.Kind != "qemu" || len(p.Architectures) != 2 || p.Architectures[0] != want[0] || p.Architectures[1] != want[1] ||
					p.CPU != (Usage{4000, 1500}) || p.Memory != (Usage{8 << 30, 1 << 30}) || !p.Ready.OK {
					t.Fatalf("%+v", p)
				}
			}},
		{"no providerID, nothing reported: no kind, no architectures, not ready", computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}},
			func(t *testing.T, p Pool) {
				if p.Kind != "" || p.Architectures == nil || len(p.Architectures) != 0 || p.Ready.OK || p.Ready.Reason != "NotReported" {
					t.Fatalf("%+v", p)
				}
			}},
		{"not ready: its reason and message", computev1alpha1.MachinePool{Status: computev1alpha1.MachinePoolStatus{
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "RuntimeUnreachable", Message: "dial"}}}},
			func(t *testing.T, p Pool) {
				if p.Ready != (Health{Reason: "RuntimeUnreachable", Message: "dial"}) {
					t.Fatalf("%+v", p.Ready)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, PoolOf(&tc.pool)) })
	}
}

func TestMachineOf(t *testing.T) {
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "c1"}},
		Spec: computev1alpha1.MachineSpec{Image: "reg/os:1", Architecture: "arm64", MachinePoolRef: &computev1alpha1.LocalObjectReference{Name: "p"},
			UserDataRef: &computev1alpha1.SecretKeySelector{Name: "first-boot-secret"}},
		Status: computev1alpha1.MachineStatus{State: computev1alpha1.MachineStateRunning, Image: &computev1alpha1.BootedImage{Reference: "reg/os:1", Digest: "sha256:abc"},
			Conditions: []metav1.Condition{{Type: computev1alpha1.ConditionImageUpToDate, Status: metav1.ConditionFalse, Reason: "Outdated"}}}}
	r := MachineOf(m)
	if r.State != "Running" || r.Pool != "p" || r.Architecture != "arm64" || r.Digest != "sha256:abc" || r.UpToDate != "Outdated" || r.Cluster != "c1" || len(r.Conditions) != 1 {
		t.Fatalf("%+v", r)
	}
	if raw, _ := json.Marshal(r); strings.Contains(string(raw), "first-boot-secret") {
		t.Errorf("a Machine's row names its first-boot Secret: %s", raw)
	}
	if r := MachineOf(&computev1alpha1.Machine{}); r.State != "Pending" {
		t.Errorf("a new Machine's state %q, want Pending", r.State)
	}
}

// TestHostOfNamesNoBMC: nothing of the BMC (address, credentials Secret) reaches a row.
func TestHostOfNamesNoBMC(t *testing.T) {
	h := &metalv1alpha1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: "anvil-metal", Name: "s1"},
		Spec: metalv1alpha1.HostSpec{Architecture: "amd64", Online: true, BootMACAddress: "52:54:00:00:00:01",
			BMC:         metalv1alpha1.BMC{Address: "redfish+https://10.1.2.3:8443/redfish/v1/Systems/1", CredentialsSecretRef: &metalv1alpha1.SecretReference{Name: "bmc-secret-s1"}},
			ConsumerRef: &metalv1alpha1.ConsumerReference{Namespace: "t", Name: "m", UID: "u"}},
		Status: metalv1alpha1.HostStatus{ProvisioningState: metalv1alpha1.StateProvisioned, PowerState: metalv1alpha1.PowerOn,
			Hardware:  &metalv1alpha1.HardwareSummary{CPUs: 2, MemoryMiB: 2048, Disks: 1, NICs: 1},
			LastError: "Redfish exception occurred. Error: HTTP GET https://10.1.2.3:8443/redfish/v1/Systems/1 returned code 500",
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "PowerFailing", Message: "10.1.2.3 does not answer"},
				{Type: "Registered", Status: metav1.ConditionTrue, Reason: "Registered", Message: "as redfish+https://10.1.2.3:8443/redfish/v1/Systems/1"}}}}
	r := HostOf(h)
	if r.State != "Provisioned" || r.Power != "On" || r.Consumer != "t/m" || r.Hardware == nil || r.Hardware.CPUs != 2 ||
		!strings.Contains(r.LastError, "returned code 500") || len(r.Conditions) != 2 || r.Ready.Reason != "PowerFailing" {
		t.Fatalf("%+v", r)
	}
	raw, _ := json.Marshal(r)
	for _, secret := range []string{"10.1.2.3", "redfish+https", "bmc-secret-s1", "52:54:00"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the Host's row holds %q: %s", secret, raw)
		}
	}
}

func TestBuildOf(t *testing.T) {
	b := &imagesv1alpha1.OSImageBuild{Spec: imagesv1alpha1.OSImageBuildSpec{OSImage: "os",
		Architectures: []imagesv1alpha1.ArchitectureInputs{{Architecture: "amd64"}, {Architecture: "arm64"}}},
		Status: imagesv1alpha1.OSImageBuildStatus{Architectures: []imagesv1alpha1.ArchitectureBuildStatus{
			{Architecture: "arm64", Phase: imagesv1alpha1.BuildPhaseFailed, Reason: "StepFailed", Message: "RUN exit 1", LogTail: "boom"}}}}
	r := BuildOf(b)
	if len(r.Architectures) != 2 || r.Architectures[0].Phase != "Pending" || r.Architectures[1].Phase != "Failed" || r.Architectures[1].LogTail != "boom" {
		t.Fatalf("%+v", r)
	}
}

func TestImageOfRollout(t *testing.T) {
	o := &imagesv1alpha1.OSImage{Spec: imagesv1alpha1.OSImageSpec{Output: imagesv1alpha1.OutputSpec{Repository: "reg/os", Tag: "latest"}},
		Status: imagesv1alpha1.OSImageStatus{Rollout: &imagesv1alpha1.RolloutStatus{Target: "sha256:1", Machines: 3, Updated: 1, Updating: 1, Pending: 1},
			Conditions: []metav1.Condition{{Type: imagesv1alpha1.ConditionRollingOut, Status: metav1.ConditionTrue, Reason: imagesv1alpha1.ReasonRolloutStalled, Message: "Machine m-2 did not come back"}}}}
	r := ImageOf(o)
	if r.Output != "reg/os:latest" || r.Rollout == nil || r.Rollout.State != "Stalled" || !strings.Contains(r.Rollout.Message, "m-2") || r.Rollout.Pending != 1 {
		t.Fatalf("%+v %+v", r, r.Rollout)
	}
}
