package host

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/metal/hostplan"
	"github.com/anvil-dev/anvil/internal/metal/imagecheck"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// act carries out s.plan.Action. A provisioner error becomes part of the plan's report;
// only API errors are returned, for controller-runtime to retry.
func (s *step) act(ctx context.Context) error {
	h, p := s.host, s.r.Provisioner
	name := NodeName(h)
	var err error
	switch s.plan.Action {
	case hostplan.ActionWait, hostplan.ActionRegister:
		if h.Spec.ConsumerRef == nil || !h.Spec.Online {
			// Nothing runs to reset: a reboot asked of an idle or powered-off server is
			// carried out by doing nothing.
			h.Status.RebootToken = h.Annotations[metalv1alpha1.AnnotationReboot]
		}
		return nil
	case hostplan.ActionInspect:
		err = p.Inspect(ctx, name)
		s.inspectStarted = err == nil
	case hostplan.ActionReadHardware:
		var hw provisioner.Hardware
		if hw, err = p.Hardware(ctx, name); err == nil {
			if err := s.r.writeHardware(ctx, h, hw); err != nil {
				return err
			}
			s.inspected = true
		}
	case hostplan.ActionProvide:
		err = p.Provide(ctx, name)
	case hostplan.ActionProvision:
		return s.provision(ctx)
	case hostplan.ActionDeprovision:
		err = p.Deprovision(ctx, name)
	case hostplan.ActionPowerOn, hostplan.ActionPowerOff:
		err = p.Power(ctx, name, s.plan.Action == hostplan.ActionPowerOn)
	case hostplan.ActionReboot:
		if err = p.Reboot(ctx, name); err == nil {
			h.Status.RebootToken = h.Annotations[metalv1alpha1.AnnotationReboot]
		}
	case hostplan.ActionAdopt:
		err = p.Adopt(ctx, name, imageOf(h.Status.Image))
	case hostplan.ActionDetach:
		err = p.Detach(ctx, name)
		if err == nil && h.DeletionTimestamp != nil {
			return s.finalize(ctx)
		}
	case hostplan.ActionDelete:
		err = p.Delete(ctx, name)
		if err == nil || errors.Is(err, provisioner.ErrNotFound) {
			return s.finalize(ctx)
		}
	case hostplan.ActionRemoveFinalizer:
		return s.finalize(ctx)
	}
	if errors.Is(err, provisioner.ErrNotFound) {
		// The provisioner lost the Host between Get and the call: the next reconcile
		// registers it again.
		s.plan.Busy = true
		return nil
	}
	if err != nil {
		s.actionFailed(ctx, err)
		return nil
	}
	// The provisioner carries calls out asynchronously: look again soon to see the result.
	s.plan.Busy = true
	return nil
}

// provision checks the image and the config drive, then asks for the deployment.
func (s *step) provision(ctx context.Context) error {
	h := s.host
	img := h.Spec.Image
	if err := s.r.Images.Verify(ctx, img.URL, img.Checksum); err != nil {
		s.plan.Failed, s.plan.Busy = true, false
		s.plan.Operational = metalv1alpha1.OperationalError
		s.plan.Reason = metalv1alpha1.ReasonImageUnavailable
		if errors.Is(err, imagecheck.ErrChecksumMismatch) {
			s.plan.Reason = metalv1alpha1.ReasonImageChecksumMismatch
		}
		s.plan.Message = err.Error()
		return nil
	}
	drive, missing, err := s.r.configDrive(ctx, h)
	if err != nil {
		return err
	}
	if missing != "" {
		s.plan.Failed, s.plan.Busy = true, false
		s.plan.Operational = metalv1alpha1.OperationalError
		s.plan.Reason, s.plan.Message = metalv1alpha1.ReasonConfigDriveMissing, missing
		return nil
	}
	if err := s.r.Provisioner.Provision(ctx, NodeName(h), provisioner.Deployment{Image: imageOf(img), ConfigDrive: drive}); err != nil {
		s.actionFailed(ctx, err)
	}
	return nil
}

// finalize removes what anvil keeps for the Host, then the finalizer.
func (s *step) finalize(ctx context.Context) error {
	h := s.host
	hw := &metalv1alpha1.HardwareData{}
	hw.Namespace, hw.Name = h.Namespace, h.Name
	if err := client.IgnoreNotFound(s.r.Client.Delete(ctx, hw)); err != nil {
		return err
	}
	if controllerutil.RemoveFinalizer(h, metalv1alpha1.FinalizerHost) {
		if err := s.r.Client.Update(ctx, h); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	s.finalized = true
	return nil
}

func imageOf(img *metalv1alpha1.HostImage) provisioner.Image {
	if img == nil {
		return provisioner.Image{}
	}
	format := string(img.Format)
	if format == "" {
		format = string(metalv1alpha1.ImageFormatRaw)
	}
	return provisioner.Image{URL: img.URL, Checksum: img.Checksum, Format: format}
}
