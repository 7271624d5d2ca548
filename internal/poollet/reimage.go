package poollet

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/poollet/machineplan"
)

// reimage asks the runtime to boot the Machine's image in place, with its first-boot
// config as it is now, and records on p what came of it. What the user must fix (an image
// that does not resolve or that the runtime refuses, a missing Secret) is a problem: the
// machine keeps its image, and its power and reboots are still carried out.
func (r *MachineReconciler) reimage(ctx context.Context, p *machineplan.Pass) error {
	m, rm := p.Machine, p.Runtime
	if cond := r.imageNotOwned(m); cond != nil {
		p.Problem(*cond) // a rollout's target is in the same repository
		return nil
	}
	t := machineplan.TargetOf(m, rm)
	if t.Resolve {
		var cond *metav1.Condition
		if t.Digest, cond = r.resolveImage(ctx, m, mri.ArchFromMRI(rm.GetSpec().GetArchitecture())); cond != nil {
			p.Problem(*cond)
			return nil
		}
	}
	boot, cond, err := r.firstBoot(ctx, p)
	if cond != nil {
		p.Problem(*cond)
		return nil
	}
	if err != nil {
		return err
	}
	resp, err := r.Runtime.ReimageMachine(ctx, &mriv1alpha1.ReimageMachineRequest{Id: rm.GetMetadata().GetId(),
		Image: &mriv1alpha1.Image{Reference: m.Spec.Image, Digest: t.Digest}, FirstBoot: boot})
	if machineplan.ReimageRefused(err) {
		r.emit(m, p.RefusedReimage(t, mri.MessageOf(err)))
		return nil
	}
	if err != nil {
		return fmt.Errorf("reimaging: %w", err)
	}
	r.emit(m, p.Reimaging(t, resp.GetMachine()))
	return nil
}
