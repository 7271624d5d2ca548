package metal

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Condition types the runtime reports on machines.
const (
	CondProvisioned = "Provisioned"
	CondPower       = "Power"
	CondDetached    = "Detached"
	CondRetired     = "Retired"
)

// retry is appended to messages of failures the Host controller retries.
const retrying = " (retrying; the pool's operators see the details)"

// hostFailures are what a tenant is told of a Host's failure, by the Host's reason. The
// Host's own lastError may name its BMC or its namespace, which tenants must not see.
var hostFailures = map[string]string{
	metalv1alpha1.ReasonImageUnavailable:       "the server could not download the machine's image",
	metalv1alpha1.ReasonImageChecksumMismatch:  "the image the server downloaded does not match its checksum",
	metalv1alpha1.ReasonProvisioningFailed:     "writing the server's disk failed",
	metalv1alpha1.ReasonConfigDriveMissing:     "the machine's config drive is missing",
	metalv1alpha1.ReasonBMCUnreachable:         "the server's management controller cannot be reached",
	metalv1alpha1.ReasonCredentialsInvalid:     "the server's management controller refused its credentials",
	metalv1alpha1.ReasonCredentialsMissing:     "the server's management controller credentials are missing",
	metalv1alpha1.ReasonPowerChangeFailed:      "switching the server's power failed",
	metalv1alpha1.ReasonProvisionerUnavailable: "the provisioning service is unavailable",
	metalv1alpha1.ReasonDeprovisioningFailed:   "wiping the server failed",
}

// observation is what a Host says of the machine claiming it.
type observation struct {
	state      mriv1alpha1.MachineState
	settled    bool
	conditions []*mriv1alpha1.Condition
	attached   bool
}

// provisioned reports whether the Host runs the image its spec asks for (HostImage.Same:
// the same files served from another address are the same machine), deployed for the
// rebuild last asked of it, if any: a reimage keeping the image is not done before that.
func provisioned(h *metalv1alpha1.Host) bool {
	rebuild := h.Annotations[metalv1alpha1.AnnotationRebuild]
	return h.Status.ProvisioningState == metalv1alpha1.StateProvisioned && h.Spec.Image.Same(h.Status.Image) &&
		(rebuild == "" || rebuild == h.Status.RebuildToken)
}

// released reports whether a deleted machine's Host is free again: deprovisioned, no
// image wanted or held. Only then is the claim cleared.
func released(h *metalv1alpha1.Host) bool {
	return h.Spec.Image == nil && h.Status.Image == nil && h.Status.ProvisioningState == metalv1alpha1.StateAvailable
}

// observe maps a claimed Host to its machine's state (CONTRACT.md S1, S2). A machine is
// settled when the Host is what the machine's spec asks for: provisioned with its image,
// powered as asked, without error.
func observe(h *metalv1alpha1.Host, rec *record, spec *mriv1alpha1.MachineSpec) observation {
	var o observation
	cond := func(t string, ok bool, reason, msg string) {
		o.conditions = append(o.conditions, &mriv1alpha1.Condition{Type: t, Status: ok, Reason: reason, Message: msg})
	}
	failed := h.Status.OperationalStatus == metalv1alpha1.OperationalError
	switch {
	case rec.DeletedAt != 0:
		o.state = mriv1alpha1.MachineState_MACHINE_STATE_TERMINATING
		cond(CondProvisioned, false, "Deprovisioning", "the server is being wiped and returned to the pool")
		return o
	case h.DeletionTimestamp != nil || h.Status.ProvisioningState == metalv1alpha1.StateDeleting:
		// The operators are removing the server: the machine cannot run again.
		o.state, o.settled = mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED, true
		cond(CondRetired, true, "ServerRetired", "the server is being removed from the pool; delete the machine")
		return o
	}
	if h.Spec.Detached || h.Status.OperationalStatus == metalv1alpha1.OperationalDetached {
		cond(CondDetached, true, "Detached", "the server runs on but is not managed; power changes wait until it is managed again")
	}
	if !provisioned(h) {
		o.state = mriv1alpha1.MachineState_MACHINE_STATE_PENDING
		switch {
		case failed:
			reason, msg := failure(h)
			cond(CondProvisioned, false, reason, msg+retrying)
		case h.Status.ProvisioningState == metalv1alpha1.StateProvisioning:
			cond(CondProvisioned, false, "Provisioning", "the machine's image is being written to the server")
		default:
			cond(CondProvisioned, false, "Waiting", "waiting for the server to start provisioning")
		}
		return o
	}
	o.attached = true
	cond(CondProvisioned, true, "Provisioned", "the server runs the machine's image")
	wantOn := spec.GetPower() == mriv1alpha1.Power_POWER_ON
	switch h.Status.PowerState {
	case metalv1alpha1.PowerOn:
		o.state = mriv1alpha1.MachineState_MACHINE_STATE_RUNNING
	case metalv1alpha1.PowerOff:
		o.state = mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN
	default:
		// Not known now: say what was asked for, unsettled, rather than go back to Pending.
		o.state = mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN
		if wantOn {
			o.state = mriv1alpha1.MachineState_MACHINE_STATE_RUNNING
		}
	}
	powered := h.Status.PowerState == metalv1alpha1.PowerOn && wantOn || h.Status.PowerState == metalv1alpha1.PowerOff && !wantOn
	// The Host's own spec.online, not the machine's spec: a power change the runtime has
	// not passed on yet is not failing.
	powerFailing := !powered && h.Spec.Online == wantOn && h.PowerFailing()
	switch {
	case powerFailing:
		msg := powerFailure(h)
		cond(CondPower, false, metalv1alpha1.ReasonPowerChangeFailed, msg)
		cond(computev1alpha1.ConditionServerPowerFailing, true, computev1alpha1.ReasonPowerChangeFailed, msg)
	case failed:
		reason, msg := failure(h)
		cond(CondPower, false, reason, msg+retrying)
	case powered && wantOn:
		cond(CondPower, true, "On", "the server is powered on, as asked")
	case powered:
		cond(CondPower, true, "Off", "the server is powered off, as asked")
	default:
		cond(CondPower, false, "Switching", "the server's power is being switched")
	}
	// A power change that keeps failing settles the status as it is, the state saying
	// what the power is: retrying it is the Host controller's, and until it works the
	// machine is not what it was before (CONTRACT.md S7).
	o.settled = powered && !failed || powerFailing
	return o
}

// powerFailure is what a tenant is told of its server's failing power: how often it
// failed, never the BMC's message (it names the Host and its BMC).
func powerFailure(h *metalv1alpha1.Host) string {
	c := h.Status.PowerChange
	what := "the last attempt"
	if c.Failures > 1 {
		what = fmt.Sprintf("the last %d attempts", c.Failures)
	}
	return fmt.Sprintf("%s to switch the server %s failed; retrying with back-off (the pool's operators see the details)",
		what, strings.ToLower(string(c.Target)))
}

// failure is the reason and tenant-safe message of a failing Host: the reason of its
// first false condition that has one the runtime knows.
func failure(h *metalv1alpha1.Host) (string, string) {
	for _, t := range []string{metalv1alpha1.ConditionProvisioned, metalv1alpha1.ConditionRegistered, metalv1alpha1.ConditionReady} {
		for _, c := range h.Status.Conditions {
			if c.Type == t && c.Status != "True" {
				if msg, ok := hostFailures[c.Reason]; ok {
					return c.Reason, msg
				}
			}
		}
	}
	return "ServerError", "the server reported an error"
}

// machineStatus is the MRI status of a machine; observed_generation is the caller's.
func machineStatus(h *metalv1alpha1.Host, rec *record, spec *mriv1alpha1.MachineSpec) (*mriv1alpha1.MachineStatus, bool) {
	o := observe(h, rec, spec)
	st := &mriv1alpha1.MachineStatus{
		State:        o.state,
		Architecture: mri.ArchToMRI(h.Spec.Architecture),
		Conditions:   o.conditions,
		RebootToken:  h.Status.RebootToken, // carried out by the Host controller, not just asked
	}
	attach := mriv1alpha1.AttachState_ATTACH_STATE_PENDING
	if o.attached {
		attach = mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED
	}
	// The image disk is the server's root disk and the NICs its own: they are there once
	// the server is provisioned (CONTRACT.md S3).
	for _, v := range spec.GetVolumes() {
		st.Volumes = append(st.Volumes, &mriv1alpha1.AttachmentStatus{Name: v.GetName(), State: attach})
	}
	for _, n := range spec.GetNetworkInterfaces() {
		st.NetworkInterfaces = append(st.NetworkInterfaces, &mriv1alpha1.AttachmentStatus{Name: n.GetName(), State: attach})
	}
	if hn := spec.GetHostname(); hn != "" {
		st.Addresses = append(st.Addresses, &mriv1alpha1.Address{Type: "Hostname", Address: hn})
	}
	if ssh := sshAddress(h); ssh != "" {
		st.Addresses = append(st.Addresses, &mriv1alpha1.Address{Type: "SSH", Address: ssh})
	}
	return st, o.settled
}

// sshAddress is the Host's AnnotationSSHAddress when it is a HOST:PORT with a port, ""
// otherwise (a malformed value is the admin's to fix, and no address beats a wrong one).
func sshAddress(h *metalv1alpha1.Host) string {
	a := h.Annotations[metalv1alpha1.AnnotationSSHAddress]
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return ""
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return ""
	}
	return a
}
