package host

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// hostEvent is one Event a status change of a Host is worth.
type hostEvent struct {
	typ, reason, action, note string
}

// statusEvents lists the Events the change from before to after is worth: a condition
// that became true (Registered, Inspected, Provisioned or Adopted, Wiped), a provisioned
// server released (Deprovisioned), a failure (the Ready reason, once per new one), each
// failed power change (PowerChangeFailed) and the power as asked again (PowerRestored).
// Pure: the controller records them after the status write that made them true.
func statusEvents(before, after *metalv1alpha1.HostStatus) []hostEvent {
	var out []hostEvent
	became := func(typ string) *metav1.Condition {
		c := meta.FindStatusCondition(after.Conditions, typ)
		if c == nil || c.Status != metav1.ConditionTrue || meta.IsStatusConditionTrue(before.Conditions, typ) {
			return nil
		}
		return c
	}
	if became(metalv1alpha1.ConditionRegistered) != nil {
		out = append(out, hostEvent{corev1.EventTypeNormal, "Registered", "Register", "the provisioner knows the server"})
	}
	if became(metalv1alpha1.ConditionInspected) != nil {
		out = append(out, hostEvent{corev1.EventTypeNormal, "Inspected", "Inspect", "the server's hardware is recorded"})
	}
	if c := became(metalv1alpha1.ConditionProvisioned); c != nil {
		reason, note := "Provisioned", "the server runs its image"
		if ready := meta.FindStatusCondition(after.Conditions, metalv1alpha1.ConditionReady); ready != nil && ready.Reason == metalv1alpha1.ReasonAdopted {
			reason, note = "Adopted", "the provisioner had lost the server; it was adopted as it runs, not provisioned again"
		}
		out = append(out, hostEvent{corev1.EventTypeNormal, reason, "Provision", note})
	}
	if before.Image != nil && after.Image == nil && after.ProvisioningState == metalv1alpha1.StateAvailable {
		out = append(out, hostEvent{corev1.EventTypeNormal, "Deprovisioned", "Deprovision", "the server no longer runs a tenant's image"})
	}
	if became(metalv1alpha1.ConditionWiped) != nil {
		out = append(out, hostEvent{corev1.EventTypeNormal, "Wiped", "Wipe", "the server's disks were erased"})
	}
	if c := meta.FindStatusCondition(after.Conditions, metalv1alpha1.ConditionWiped); c != nil && c.Reason == metalv1alpha1.ReasonWipeFailed {
		if b := meta.FindStatusCondition(before.Conditions, metalv1alpha1.ConditionWiped); b == nil || b.Reason != c.Reason {
			out = append(out, hostEvent{corev1.EventTypeWarning, metalv1alpha1.ReasonWipeFailed, "Wipe", c.Message})
		}
	}
	// A power change: a Warning for each failure (the back-off spaces them out), and word
	// when the power is as asked again.
	failures := func(st *metalv1alpha1.HostStatus) int32 {
		if st.PowerChange == nil {
			return 0
		}
		return st.PowerChange.Failures
	}
	powerFailed := failures(after) > failures(before)
	if powerFailed {
		out = append(out, hostEvent{corev1.EventTypeWarning, metalv1alpha1.ReasonPowerChangeFailed, "Power", after.LastError})
	}
	if failures(before) > 0 && after.PowerChange == nil {
		out = append(out, hostEvent{corev1.EventTypeNormal, "PowerRestored", "Power", "the server's power is as spec.online asks again"})
	}
	if after.OperationalStatus == metalv1alpha1.OperationalError {
		now, was := meta.FindStatusCondition(after.Conditions, metalv1alpha1.ConditionReady), meta.FindStatusCondition(before.Conditions, metalv1alpha1.ConditionReady)
		if now != nil && (before.OperationalStatus != metalv1alpha1.OperationalError || was == nil || was.Reason != now.Reason) &&
			!(powerFailed && now.Reason == metalv1alpha1.ReasonPowerChangeFailed) {
			out = append(out, hostEvent{corev1.EventTypeWarning, now.Reason, "Provision", now.Message})
		}
	}
	return out
}
