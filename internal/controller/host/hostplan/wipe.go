package hostplan

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// Wiping a released server. A Host provisioned with any image but the eraser is marked
// not wiped (the Wiped condition, False with TenantData) from the moment the provisioner is
// asked to deploy it, and seen so again at every look while the provisioner shows that
// image, so a lost status write cannot lose the mark. Back at Available, a Host not wiped
// is not Available: it stays Deprovisioning, the eraser is deployed, and when the server has
// powered itself off (the eraser's sign of success) the Host is marked wiped and the
// eraser torn down. Only then is it Available, and only Available Hosts are claimed. The
// mark lives in the Host's status, and in the deployment record (record.go), which
// survives a lost status and is removed only when the eraser has run to its end: a
// restart in the middle, or a restore without status, wipes again, never hands out.

// wipes: this Host is wiped by the site's eraser.
func wipes(in Input) bool { return in.Eraser != nil }

// notWiped: the Host's disks may hold what a Machine left, by its status or its
// deployment record.
func notWiped(in Input) bool { return notWipedByStatus(in.Host) || leftBehind(in) }

// notWipedByStatus: the Wiped condition is there and not True.
func notWipedByStatus(h *metalv1alpha1.Host) bool {
	c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionWiped)
	return c != nil && c.Status != metav1.ConditionTrue
}

// isEraser: img is the site's eraser (the same files, by checksum).
func isEraser(in Input, img provisioner.Image) bool {
	return wipes(in) && in.Eraser.Kernel != nil && HostImageOf(*in.Eraser).Same(HostImageOf(img))
}

// tenantImage: the provisioner shows the node deployed, or being deployed, with an image
// that is not the eraser.
func tenantImage(in Input) bool {
	n := in.Node
	if n == nil || (n.Image.URL == "" && n.Image.Kernel == nil) {
		return false
	}
	switch n.State {
	case provisioner.StateActive, provisioner.StateDeploying, provisioner.StateAdopting, provisioner.StateFailed:
		return !isEraser(in, n.Image)
	}
	return false
}

// markTenantData records in p that the disks now hold a tenant's data.
func markTenantData(p Plan) Plan {
	p.WipeReason = metalv1alpha1.ReasonTenantData
	p.WipeMessage = "the server was provisioned with a Machine's image; it is erased before anyone else gets it"
	return p
}

// startWipe deploys the eraser on an Available Host that is not wiped. A site that erases
// but has no eraser for the Host's architecture fails the wipe without a call: the Host
// stays out of reach until one is configured.
func startWipe(in Input) Plan {
	p := Plan{Action: ActionWipe, State: metalv1alpha1.StateDeprovisioning, Operational: metalv1alpha1.OperationalOK,
		Reason: metalv1alpha1.ReasonWiping, Busy: true, WipeReason: metalv1alpha1.ReasonWiping}
	if in.Eraser.Kernel == nil {
		p, _ = Conclude(p, Result{Outcome: OutcomeFailed, Message: "the site has no eraser for architecture " + string(in.Host.Spec.Architecture)})
		p.Action = ActionWait // nothing to carry out
	}
	return p
}

// eraserRuns decides for a node deployed (or deploying) with the eraser: wait for the
// server to power itself off, then mark the Host wiped and tear the eraser down; past the
// time-out, tear it down as failed (the next Available deploys it again, after back-off).
func eraserRuns(in Input) Plan {
	h, n := in.Host, in.Node
	if !notWiped(in) {
		// Wiped already (the status write landed, the tear-down did not): tear down.
		return Plan{Action: ActionDeprovision, State: metalv1alpha1.StateDeprovisioning, Operational: metalv1alpha1.OperationalOK,
			Reason: metalv1alpha1.ReasonWiping, Busy: true}
	}
	if n.State == provisioner.StateActive && n.PowerOn != nil && !*n.PowerOn {
		// Wiped: the record of what the disks held goes first, before the status says so.
		return Plan{Action: ActionDeprovision, State: metalv1alpha1.StateDeprovisioning, Operational: metalv1alpha1.OperationalOK,
			Reason: metalv1alpha1.ReasonWiping, Busy: true, WipeReason: metalv1alpha1.ReasonWiped, ClearRecord: in.record != nil}
	}
	if started := h.Status.WipeStartedAt; started != nil && in.WipeTimeout > 0 && in.Now.Sub(started.Time) > in.WipeTimeout {
		msg := fmt.Sprintf("the eraser did not power the server off within %s of its deployment (its console says why)", in.WipeTimeout)
		return Plan{Action: ActionDeprovision, State: metalv1alpha1.StateDeprovisioning, Operational: metalv1alpha1.OperationalError,
			Reason: metalv1alpha1.ReasonWipeFailed, Message: msg, Failed: true,
			WipeReason: metalv1alpha1.ReasonWipeFailed, WipeMessage: msg}
	}
	p := busy(metalv1alpha1.StateDeprovisioning, metalv1alpha1.ReasonWiping)
	p.WipeReason, p.WipeStarted = metalv1alpha1.ReasonWiping, true
	return p
}

// eraserFailed: the provisioner failed the eraser's deployment. Tear it down; the next
// Available deploys it again, after back-off.
func eraserFailed(in Input) Plan {
	msg := "the eraser's deployment failed: " + in.Node.LastError
	return Plan{Action: ActionDeprovision, State: metalv1alpha1.StateDeprovisioning, Operational: metalv1alpha1.OperationalError,
		Reason: metalv1alpha1.ReasonWipeFailed, Message: msg, Failed: true,
		WipeReason: metalv1alpha1.ReasonWipeFailed, WipeMessage: msg}
}
