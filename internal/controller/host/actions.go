package host

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/host/hostplan"
	"github.com/anvil-dev/anvil/internal/controller/host/imagecheck"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// execute carries out s.plan.Action and says what it came to; what it learnt goes into in
// for the next decision. Only API errors are returned, for controller-runtime to retry.
func (s *step) execute(ctx context.Context, in *hostplan.Input) (hostplan.Result, error) {
	h, p := s.host, s.r.Provisioner
	name := nodeName(h)
	if in.Unreachable {
		return resultOf(ctx, name, s.lookupErr), nil
	}
	var err error
	switch s.plan.Action {
	case hostplan.ActionWait:
		if h.Spec.ConsumerRef == nil || !h.Spec.Online {
			// Nothing runs to reset: a reboot asked of an idle or powered-off server is
			// carried out by doing nothing.
			h.Status.RebootToken = h.Annotations[metalv1alpha1.AnnotationReboot]
		}
	case hostplan.ActionRegister:
		var n provisioner.Node
		if n, err = p.Register(ctx, s.registration); err == nil {
			s.node, in.Node, in.Reregister = &n, &n, false
			h.Status.ObservedGeneration, h.Status.CredentialsVersion = h.Generation, s.credentials
		}
	case hostplan.ActionInspect:
		err = p.Inspect(ctx, name)
		s.inspectStarted = err == nil
	case hostplan.ActionReadHardware:
		var hw provisioner.Hardware
		if hw, err = p.Hardware(ctx, name); err == nil {
			if err := s.r.writeHardware(ctx, h, hw); err != nil {
				return hostplan.Result{}, err
			}
			s.inspected = true
			in.HardwareKnown, in.InspectionStarted = true, false
		}
	case hostplan.ActionProvide:
		err = p.Provide(ctx, name)
	case hostplan.ActionProvision:
		return s.deploy(ctx, s.r.Provisioner.Provision)
	case hostplan.ActionRebuild:
		return s.deploy(ctx, s.r.Provisioner.Rebuild)
	case hostplan.ActionWipe:
		return s.wipe(ctx, *in.Eraser)
	case hostplan.ActionDeprovision:
		err = p.Deprovision(ctx, name)
	case hostplan.ActionPowerOn, hostplan.ActionPowerOff:
		err = p.Power(ctx, name, s.plan.Action == hostplan.ActionPowerOn)
	case hostplan.ActionReboot:
		if err = p.Reboot(ctx, name); err == nil {
			h.Status.RebootToken = h.Annotations[metalv1alpha1.AnnotationReboot]
			if s.plan.Record != nil {
				// After the reset: the status carries the token too, so a lost write
				// costs a second reset only if the status is lost as well.
				if err := s.writeRecord(ctx, s.plan.Record, false); err != nil {
					log.FromContext(ctx).Info("the reboot is not in the Host's deployment record; its status has it", "host", name, "error", err)
				}
			}
		}
	case hostplan.ActionAdopt:
		d := deploymentOf(h, s.plan.Adopt)
		if rec, _ := hostplan.RecordOf(h); rec != nil {
			d.Token = rec.Rebuild
		}
		err = p.Adopt(ctx, name, d)
	case hostplan.ActionDetach:
		err = p.Detach(ctx, name)
	case hostplan.ActionDelete:
		err = p.Delete(ctx, name)
	case hostplan.ActionRemoveFinalizer:
		// Nothing to ask: the provisioner has forgotten the Host (Conclude releases it).
	}
	return resultOf(ctx, name, err), nil
}

// deploy checks the image and the config drive, then asks for the deployment (Provision)
// or the rebuild (Rebuild). Once asked, the Host's rebuild token is carried out: the
// server is being written with what the Host asks now.
func (s *step) deploy(ctx context.Context, call func(context.Context, string, provisioner.Deployment) error) (hostplan.Result, error) {
	h := s.host
	if res, ok := s.verify(ctx, hostplan.ImageOf(h.Spec.Image)); !ok {
		return res, nil
	}
	drive, missing, err := s.r.configDrive(ctx, h)
	if err != nil {
		return hostplan.Result{}, err
	}
	if missing != "" {
		return hostplan.Result{Outcome: hostplan.OutcomeConfigDriveMissing, Message: missing}, nil
	}
	d := deploymentOf(h, h.Spec.Image)
	d.ConfigDrive, d.Token = drive, h.Annotations[metalv1alpha1.AnnotationRebuild]
	// The record that the server may hold the deployment goes on the Host before the
	// provisioner starts it, and only then (not while the deployment waits for a slot).
	var recordErr error
	if rec := s.plan.Record; rec != nil {
		d.Starting = func(ctx context.Context) error {
			recordErr = s.writeRecord(ctx, rec, false)
			return recordErr
		}
	}
	err = call(ctx, nodeName(h), d)
	if recordErr != nil {
		return hostplan.Result{}, recordErr
	}
	if err == nil {
		h.Status.RebuildToken = d.Token
	}
	return resultOf(ctx, nodeName(h), err), nil
}

// wipe checks the eraser's files, then deploys it: from RAM, with no config drive.
func (s *step) wipe(ctx context.Context, eraser provisioner.Image) (hostplan.Result, error) {
	if res, ok := s.verify(ctx, eraser); !ok {
		return res, nil
	}
	d := deploymentOf(s.host, nil)
	d.Image = eraser
	err := s.r.Provisioner.Provision(ctx, nodeName(s.host), d)
	return resultOf(ctx, nodeName(s.host), err), nil
}

// verify downloads img's files and checks their checksums, as the provisioner's own
// agent would only after booting.
func (s *step) verify(ctx context.Context, img provisioner.Image) (hostplan.Result, bool) {
	for _, f := range imageFiles(img) {
		if err := s.r.Images.Verify(ctx, f.URL, f.Checksum); err != nil {
			if errors.Is(err, imagecheck.ErrChecksumMismatch) {
				return hostplan.Result{Outcome: hostplan.OutcomeImageChecksumMismatch, Message: err.Error()}, false
			}
			return hostplan.Result{Outcome: hostplan.OutcomeImageUnavailable, Message: err.Error()}, false
		}
	}
	return hostplan.Result{}, true
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

// deploymentOf is img deployed on h, booted in h's boot mode.
func deploymentOf(h *metalv1alpha1.Host, img *metalv1alpha1.HostImage) provisioner.Deployment {
	mode := provisioner.BootModeUEFI
	if h.Spec.BootMode == metalv1alpha1.BootModeLegacy {
		mode = provisioner.BootModeLegacy
	}
	return provisioner.Deployment{Image: hostplan.ImageOf(img), BootMode: mode}
}

// imageFiles are the files of img the image check reads: the disk image, or the kernel
// and initramfs.
func imageFiles(img provisioner.Image) []provisioner.File {
	if img.Ramdisk() {
		files := []provisioner.File{*img.Kernel}
		if img.Initramfs != nil {
			files = append(files, *img.Initramfs)
		}
		return files
	}
	return []provisioner.File{{URL: img.URL, Checksum: img.Checksum}}
}
