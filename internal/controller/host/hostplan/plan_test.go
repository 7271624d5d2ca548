package hostplan

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

var (
	imgA = &metalv1alpha1.HostImage{URL: "http://x/a", Checksum: "sha256:aa"}
	imgB = &metalv1alpha1.HostImage{URL: "http://x/b", Checksum: "sha256:bb"}
	on   = true
	off  = false
)

type hostOpt func(*metalv1alpha1.Host)

// host builds a Host. One that ran an image (ran) and has no deployment record gets the
// record of that deployment for its (final) consumer, as the Host controller writes it.
func host(opts ...hostOpt) *metalv1alpha1.Host {
	h := &metalv1alpha1.Host{}
	for _, o := range opts {
		o(h)
	}
	if _, ok := h.Annotations[metalv1alpha1.AnnotationDeployment]; h.Status.Image != nil && !ok {
		recorded(&Record{Consumer: consumerUID(h), Image: h.Status.Image})(h)
	}
	if h.Annotations[metalv1alpha1.AnnotationDeployment] == "none" {
		delete(h.Annotations, metalv1alpha1.AnnotationDeployment)
	}
	return h
}

// recorded gives the Host a deployment record.
func recorded(r *Record) hostOpt {
	return func(h *metalv1alpha1.Host) {
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[metalv1alpha1.AnnotationDeployment] = r.Encode()
	}
}

// unrecorded: the Host has no deployment record, whatever it ran.
func unrecorded(h *metalv1alpha1.Host) {
	if h.Annotations == nil {
		h.Annotations = map[string]string{}
	}
	h.Annotations[metalv1alpha1.AnnotationDeployment] = "none"
}

func state(s metalv1alpha1.ProvisioningState) hostOpt {
	return func(h *metalv1alpha1.Host) { h.Status.ProvisioningState = s }
}
func wants(i *metalv1alpha1.HostImage) hostOpt {
	return func(h *metalv1alpha1.Host) { h.Spec.Image = i }
}
func ran(i *metalv1alpha1.HostImage) hostOpt {
	return func(h *metalv1alpha1.Host) { h.Status.Image = i }
}
func online(h *metalv1alpha1.Host)   { h.Spec.Online = true }
func detached(h *metalv1alpha1.Host) { h.Spec.Detached = true }
func deleted(h *metalv1alpha1.Host) {
	t := metav1.NewTime(time.Unix(1, 0))
	h.DeletionTimestamp = &t
}

func node(s provisioner.State, opts ...func(*provisioner.Node)) *provisioner.Node {
	n := &provisioner.Node{State: s, PowerOn: &off}
	for _, o := range opts {
		o(n)
	}
	return n
}
func powered(n *provisioner.Node) { n.PowerOn = &on }
func running(i *metalv1alpha1.HostImage) func(*provisioner.Node) {
	return func(n *provisioner.Node) { n.Image = provisioner.Image{URL: i.URL, Checksum: i.Checksum} }
}
func failedFrom(op provisioner.Operation) func(*provisioner.Node) {
	return func(n *provisioner.Node) { n.FailedFrom, n.LastError = op, "it broke" }
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     Input
		action Action
		state  metalv1alpha1.ProvisioningState
		op     metalv1alpha1.OperationalStatus
	}{
		{"new host registers", Input{Host: host()}, ActionRegister, metalv1alpha1.StateRegistering, metalv1alpha1.OperationalOK},
		{"enrolling waits", Input{Host: host(), Node: node(provisioner.StateEnrolling)}, ActionWait, metalv1alpha1.StateRegistering, metalv1alpha1.OperationalOK},
		{"manageable without hardware inspects", Input{Host: host(state(metalv1alpha1.StateRegistering)), Node: node(provisioner.StateManageable)},
			ActionInspect, metalv1alpha1.StateInspecting, metalv1alpha1.OperationalOK},
		{"manageable in state Inspecting but never inspected inspects", Input{Host: host(state(metalv1alpha1.StateInspecting)), Node: node(provisioner.StateManageable)},
			ActionInspect, metalv1alpha1.StateInspecting, metalv1alpha1.OperationalOK},
		{"manageable after inspecting reads hardware", Input{Host: host(state(metalv1alpha1.StateInspecting)), Node: node(provisioner.StateManageable), InspectionStarted: true},
			ActionReadHardware, metalv1alpha1.StateInspecting, metalv1alpha1.OperationalOK},
		{"manageable with hardware provides", Input{Host: host(state(metalv1alpha1.StateInspecting)), Node: node(provisioner.StateManageable), HardwareKnown: true},
			ActionProvide, metalv1alpha1.StateInspecting, metalv1alpha1.OperationalOK},
		{"available and idle", Input{Host: host(), Node: node(provisioner.StateAvailable), HardwareKnown: true},
			ActionWait, metalv1alpha1.StateAvailable, metalv1alpha1.OperationalOK},
		{"available powers on when online", Input{Host: host(online), Node: node(provisioner.StateAvailable)},
			ActionPowerOn, metalv1alpha1.StateAvailable, metalv1alpha1.OperationalOK},
		{"available with image provisions", Input{Host: host(wants(imgA)), Node: node(provisioner.StateAvailable)},
			ActionProvision, metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalOK},
		{"deploying waits", Input{Host: host(wants(imgA)), Node: node(provisioner.StateDeploying)},
			ActionWait, metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalOK},
		{"active with the image is provisioned", Input{Host: host(wants(imgA), online), Node: node(provisioner.StateActive, powered, running(imgA))},
			ActionWait, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},
		{"active powers off when not online", Input{Host: host(wants(imgA)), Node: node(provisioner.StateActive, powered, running(imgA))},
			ActionPowerOff, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},
		{"active and on reboots for a new token", Input{Host: host(wants(imgA), online), Node: node(provisioner.StateActive, powered, running(imgA)), RebootRequested: true},
			ActionReboot, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},
		{"power comes before a reboot", Input{Host: host(wants(imgA), online), Node: node(provisioner.StateActive, running(imgA)), RebootRequested: true},
			ActionPowerOn, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},
		{"active without image deprovisions", Input{Host: host(ran(imgA)), Node: node(provisioner.StateActive, running(imgA))},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK},
		{"active with another image deprovisions first", Input{Host: host(wants(imgB), ran(imgA)), Node: node(provisioner.StateActive, running(imgA))},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK},
		{"cleaning after provisioned is deprovisioning", Input{Host: host(ran(imgA)), Node: node(provisioner.StateCleaning)},
			ActionWait, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK},

		// The provisioner lost its records: enrol again, keep saying Provisioned, adopt.
		{"lost provisioned host registers as provisioned", Input{Host: host(wants(imgA), ran(imgA), state(metalv1alpha1.StateProvisioned))},
			ActionRegister, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},
		{"lost provisioned host is adopted, not inspected", Input{Host: host(wants(imgA), ran(imgA), state(metalv1alpha1.StateProvisioned)), Node: node(provisioner.StateManageable)},
			ActionAdopt, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},
		{"lost provisioned host is adopted, not provided", Input{Host: host(wants(imgA), ran(imgA)), Node: node(provisioner.StateManageable), HardwareKnown: true},
			ActionAdopt, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},
		{"lost available host is provided without inspection", Input{Host: host(state(metalv1alpha1.StateAvailable)), Node: node(provisioner.StateManageable), HardwareKnown: true},
			ActionProvide, metalv1alpha1.StateInspecting, metalv1alpha1.OperationalOK},
		{"changed credentials register again", Input{Host: host(wants(imgA), ran(imgA)), Node: node(provisioner.StateActive, running(imgA)), Reregister: true},
			ActionRegister, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},

		// Failures: each retries something idempotent and says Error.
		{"registration failure retries registration", Input{Host: host(), Node: node(provisioner.StateFailed, failedFrom(provisioner.OpRegister))},
			ActionRegister, metalv1alpha1.StateRegistering, metalv1alpha1.OperationalError},
		{"inspection failure inspects again", Input{Host: host(), Node: node(provisioner.StateFailed, failedFrom(provisioner.OpInspect))},
			ActionInspect, metalv1alpha1.StateInspecting, metalv1alpha1.OperationalError},
		{"deploy failure goes back through deprovision", Input{Host: host(wants(imgA)), Node: node(provisioner.StateFailed, failedFrom(provisioner.OpProvision))},
			ActionDeprovision, metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalError},
		{"adopt failure adopts again", Input{Host: host(wants(imgA), ran(imgA)), Node: node(provisioner.StateFailed, failedFrom(provisioner.OpAdopt))},
			ActionAdopt, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalError},
		{"adopt failure of a Host released meanwhile deprovisions", Input{Host: host(ran(imgA)), Node: node(provisioner.StateFailed, failedFrom(provisioner.OpAdopt))},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalError},
		{"clean failure deprovisions again", Input{Host: host(), Node: node(provisioner.StateFailed, failedFrom(provisioner.OpClean))},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalError},

		// The inputs the controller cannot act on.
		{"missing credentials are reported instead of registering", Input{Host: host(), CredentialsProblem: "no Secret"},
			ActionWait, metalv1alpha1.StateRegistering, metalv1alpha1.OperationalError},
		{"missing credentials keep a lost provisioned host's state", Input{Host: host(ran(imgA), state(metalv1alpha1.StateProvisioned)), CredentialsProblem: "no Secret"},
			ActionWait, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalError},
		{"missing credentials do not stop a registered host", Input{Host: host(wants(imgA), online), Node: node(provisioner.StateActive, powered, running(imgA)), CredentialsProblem: "no Secret"},
			ActionWait, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},
		{"an unreachable provisioner keeps the state", Input{Host: host(state(metalv1alpha1.StateProvisioned)), Unreachable: true},
			ActionWait, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},

		{"detached host is detached from the provisioner", Input{Host: host(detached, ran(imgA), state(metalv1alpha1.StateProvisioned)), Node: node(provisioner.StateActive)},
			ActionDetach, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalDetached},
		{"detached and forgotten waits", Input{Host: host(detached, state(metalv1alpha1.StateProvisioned))},
			ActionWait, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalDetached},

		{"deleting a provisioned host deprovisions", Input{Host: host(deleted, ran(imgA)), Node: node(provisioner.StateActive)},
			ActionDeprovision, metalv1alpha1.StateDeprovisioning, metalv1alpha1.OperationalOK},
		{"deleting an available host deletes the node", Input{Host: host(deleted), Node: node(provisioner.StateAvailable)},
			ActionDelete, metalv1alpha1.StateDeleting, metalv1alpha1.OperationalOK},
		{"deleting a detached host does not deprovision", Input{Host: host(deleted, detached, ran(imgA), state(metalv1alpha1.StateProvisioned)), Node: node(provisioner.StateActive)},
			ActionDetach, metalv1alpha1.StateProvisioned, metalv1alpha1.OperationalOK},
		{"deleting while cleaning waits", Input{Host: host(deleted), Node: node(provisioner.StateCleaning)},
			ActionWait, metalv1alpha1.StateDeleting, metalv1alpha1.OperationalOK},
		{"deleted and forgotten lets go", Input{Host: host(deleted)}, ActionRemoveFinalizer, metalv1alpha1.StateDeleting, metalv1alpha1.OperationalOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.in)
			if p.Action != tc.action || p.State != tc.state || p.Operational != tc.op {
				t.Fatalf("Decide = %s %s %s, want %s %s %s", p.Action, p.State, p.Operational, tc.action, tc.state, tc.op)
			}
			if p.Reason == "" {
				t.Fatalf("plan %s has no Reason", p.Action)
			}
			if (tc.op == metalv1alpha1.OperationalError) != p.Failed {
				t.Fatalf("Failed = %v for operational status %s", p.Failed, p.Operational)
			}
		})
	}
}

// A Host that ran an image is never provided or provisioned again while it still wants the
// same image, whatever the provisioner says: only adoption or deprovisioning touch it.
func TestProvisionedHostIsNeverReimaged(t *testing.T) {
	states := []provisioner.State{provisioner.StateUnknown, provisioner.StateEnrolling, provisioner.StateManageable,
		provisioner.StateInspecting, provisioner.StateCleaning, provisioner.StateAvailable, provisioner.StateDeploying,
		provisioner.StateActive, provisioner.StateAdopting, provisioner.StateDeleting, provisioner.StateFailed}
	for _, s := range states {
		for _, hw := range []bool{false, true} {
			in := Input{Host: host(wants(imgA), ran(imgA), state(metalv1alpha1.StateProvisioned)), HardwareKnown: hw,
				Node: node(s, running(imgA), failedFrom(provisioner.OpAdopt))}
			// Restored from a backup without status: the deployment record alone decides.
			cleared := in
			cleared.Host = in.Host.DeepCopy()
			cleared.Host.Status = metalv1alpha1.HostStatus{}
			if s == provisioner.StateAvailable {
				continue // Available means the disk was wiped already: provisioning is then right
			}
			for _, in := range []Input{in, cleared, withEraser(in), withEraser(cleared)} {
				switch a := Decide(in).Action; a {
				case ActionProvide, ActionProvision, ActionInspect, ActionDeprovision, ActionWipe, ActionRebuild:
					t.Errorf("node %s (hardware known %v, status cleared %v, eraser %v): Decide = %s on a provisioned Host",
						s, hw, in.Host.Status.ProvisioningState == "", in.Eraser != nil, a)
				}
			}
		}
	}
}

func TestRegistrationReason(t *testing.T) {
	for msg, want := range map[string]string{
		"HTTP 401 Unauthorized":                 metalv1alpha1.ReasonCredentialsInvalid,
		"Access denied for user":                metalv1alpha1.ReasonCredentialsInvalid,
		"Connection refused by 127.0.0.1:1":     metalv1alpha1.ReasonBMCUnreachable,
		"Max retries exceeded with url":         metalv1alpha1.ReasonBMCUnreachable,
		"driver fake-hardware is not supported": metalv1alpha1.ReasonRegistrationFailed,
	} {
		if got := RegistrationReason(msg); got != want {
			t.Errorf("RegistrationReason(%q) = %s, want %s", msg, got, want)
		}
	}
}

// An image round-trips through the provisioner's form, and the same files under other
// URLs are the same image; a disk is never a kernel, nor one command line another.
func TestSameImage(t *testing.T) {
	kernel := &metalv1alpha1.BootFile{URL: "http://x/k", Checksum: "sha256:kk"}
	initramfs := &metalv1alpha1.BootFile{URL: "http://x/r", Checksum: "sha256:rr"}
	ramdisk := &metalv1alpha1.HostImage{Kernel: kernel, Initramfs: initramfs, KernelArguments: "console=ttyS0"}
	moved := &metalv1alpha1.HostImage{Kernel: &metalv1alpha1.BootFile{URL: "http://y/k", Checksum: "sha256:kk"},
		Initramfs: &metalv1alpha1.BootFile{URL: "http://y/r", Checksum: "sha256:rr"}, KernelArguments: "console=ttyS0"}
	otherArgs := ramdisk.DeepCopy()
	otherArgs.KernelArguments = "quiet"
	otherInitramfs := ramdisk.DeepCopy()
	otherInitramfs.Initramfs.Checksum = "sha256:r2"
	qcow := imgA.DeepCopy()
	qcow.Format = metalv1alpha1.ImageFormatQCOW2
	rawA := imgA.DeepCopy()
	rawA.Format = metalv1alpha1.ImageFormatRaw
	for _, tc := range []struct {
		name       string
		want, have *metalv1alpha1.HostImage
		same       bool
	}{
		{"disk", imgA, imgA, true},
		{"disk, format raw spelled out", imgA, rawA, true},
		{"other disk", imgA, imgB, false},
		{"other format", imgA, qcow, false},
		{"ramdisk", ramdisk, ramdisk, true},
		{"ramdisk served elsewhere", ramdisk, moved, true},
		{"other command line", ramdisk, otherArgs, false},
		{"other initramfs", ramdisk, otherInitramfs, false},
		{"disk for ramdisk", ramdisk, imgA, false},
		{"ramdisk for disk", imgA, ramdisk, false},
		{"nothing wanted", nil, ramdisk, false},
	} {
		if got := SameImage(tc.want, ImageOf(tc.have)); got != tc.same {
			t.Errorf("%s: SameImage = %v, want %v", tc.name, got, tc.same)
		}
		if got := tc.want.Same(tc.have); got != tc.same {
			t.Errorf("%s: HostImage.Same = %v, want %v", tc.name, got, tc.same)
		}
	}
}
