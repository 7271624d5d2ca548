package hostplan

import (
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// Rebuilding a provisioned server in place. A Host's consumer asks for it with the
// metal.anvil.dev/rebuild annotation, a token naming the consumer (the metal runtime sets
// it at a Machine's reimage): then a new spec.image is written by the provisioner's
// rebuild, with the config drive spec.configDrive names now, and the server's other disks
// are kept; nothing is wiped, since the same tenant keeps the server. Each new token also
// rebuilds once with an unchanged image (a new config drive). A failed rebuild is retried
// as a rebuild. Without a token naming the consumer (none, or one another consumer left, or
// no consumer at all) a new image is written only after a deprovision, and the wipe where
// the site wipes: the server may be changing hands.

// keepsServer: the Host's consumer asked that its server be rebuilt in place.
func keepsServer(h *metalv1alpha1.Host) bool {
	token := h.Annotations[metalv1alpha1.AnnotationRebuild]
	return h.Spec.ConsumerRef != nil && token != "" && metalv1alpha1.RebuildConsumer(token) == h.Spec.ConsumerRef.UID
}

// rebuildPending: the consumer's rebuild token was not carried out yet.
func rebuildPending(h *metalv1alpha1.Host) bool {
	return keepsServer(h) && h.Annotations[metalv1alpha1.AnnotationRebuild] != h.Status.RebuildToken
}

// rebuild is the plan that rebuilds the server; while it runs the Host is Provisioning.
func rebuild(in Input, op metalv1alpha1.OperationalStatus, reason, msg string) Plan {
	return Plan{Action: ActionRebuild, State: metalv1alpha1.StateProvisioning, Operational: op, Reason: reason, Message: msg,
		Busy: op == metalv1alpha1.OperationalOK, Failed: op == metalv1alpha1.OperationalError, Record: deploymentRecord(in)}
}
