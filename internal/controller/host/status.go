package host

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/host/hostplan"
)

// apply writes the concluded plan and what the provisioner reported into the Host's status
// (in memory; patchStatus sends it): hostplan.Status decides it.
func (s *step) apply() {
	s.host.Status = hostplan.Status(hostplan.StatusInput{Host: s.host, Plan: s.plan, Node: s.node,
		HardwareKnown: s.hwKnown, InspectionStarted: s.inspectStarted, Inspected: s.inspected, Now: s.now})
}

// patchStatus sends the status in one patch, only when it changed.
func (r *Reconciler) patchStatus(ctx context.Context, h *metalv1alpha1.Host, before *metalv1alpha1.HostStatus) error {
	if equality.Semantic.DeepEqual(before, &h.Status) {
		return nil
	}
	after := h.Status
	base := h.DeepCopy()
	base.Status = *before
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	h.Status = after
	return r.Client.Status().Patch(ctx, h, patch)
}
