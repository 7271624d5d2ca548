package host

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/host/hostplan"
)

// The Host's deployment record (hostplan/record.go) is metadata the Host controller alone
// writes — no one else writes that annotation, and the metal runtime's read-modify-write
// updates keep it — with the resourceVersion of the Host the decision was made on, so it
// is never written for a spec that changed meanwhile (a conflict: decided again).

// recordFirst writes what the plan says of the record before its action: ClearRecord, or
// a Record written before the action (for Provision and Rebuild it is written as the
// deployment starts, for Reboot after the reset: see hostplan.Plan).
func (s *step) recordFirst(ctx context.Context) error {
	p := s.plan
	switch {
	case p.ClearRecord:
		return s.writeRecord(ctx, nil, true)
	case p.Record == nil, p.Action == hostplan.ActionProvision, p.Action == hostplan.ActionRebuild, p.Action == hostplan.ActionReboot:
		return nil
	}
	return s.writeRecord(ctx, p.Record, false)
}

// writeRecord sets the Host's deployment record to rec, or removes it (clear), unless it
// is so already; the Host in memory gets the new annotations and resourceVersion, so the
// status patch that follows applies to it.
func (s *step) writeRecord(ctx context.Context, rec *hostplan.Record, clear bool) error {
	h := s.host
	have, ok := h.Annotations[metalv1alpha1.AnnotationDeployment]
	if clear && !ok || !clear && ok && have == rec.Encode() {
		return nil
	}
	patched := h.DeepCopy()
	if clear {
		delete(patched.Annotations, metalv1alpha1.AnnotationDeployment)
	} else {
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		patched.Annotations[metalv1alpha1.AnnotationDeployment] = rec.Encode()
	}
	if err := s.r.Client.Patch(ctx, patched, client.MergeFromWithOptions(h, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	h.Annotations, h.ResourceVersion = patched.Annotations, patched.ResourceVersion
	return nil
}
