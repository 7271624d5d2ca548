package metal

import (
	"context"
	"strings"

	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/mutate"
	"github.com/anvil-dev/anvil/internal/runtime/metal/placement"
)

// ReimageMachine gives the machine's server another image, keeping the server: it checks
// the image as CreateMachine does, then, in one update of the Host, points spec.image at
// the new image's files, names the new config drive (when first_boot changes it) and asks
// the Host controller for a rebuild with a new metal.anvil.dev/rebuild token. The Host
// controller rebuilds the server in place (its other disks kept, nothing wiped); the
// machine is settled again once the Host is Provisioned with the new image for that
// token and powered as its spec says (CONTRACT.md E8).
//
// A new config drive is a Secret of its own, written before the Host update and named by
// it, so a crash between the two leaves the Host as it was; the Secret it replaces goes
// with the next sweep.
func (r *Runtime) ReimageMachine(ctx context.Context, req *mriv1alpha1.ReimageMachineRequest) (*mriv1alpha1.ReimageMachineResponse, error) {
	if err := mri.ValidateReimage(req); err != nil {
		return nil, err
	}
	if err := r.AwaitReady(ctx); err != nil {
		return nil, err
	}
	id := req.GetId()
	cur, hostName, err := r.machine(id)
	if err != nil {
		return nil, err
	}
	if cur.Metadata.DeletedAtUnixNano != 0 {
		return nil, mri.Invalidf("machine %s is being deleted", id)
	}
	next := proto.Clone(cur.Spec).(*mriv1alpha1.MachineSpec)
	if !mutate.Reimage(next, req.GetImage(), req.GetFirstBoot()) {
		return &mriv1alpha1.ReimageMachineResponse{Machine: cur}, nil // as asked already (E3)
	}
	if err := validateSpec(next); err != nil {
		return nil, err
	}
	files, err := r.resolveBootFiles(ctx, req.GetImage(), mri.ArchFromMRI(next.GetArchitecture()))
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	h := r.hosts[hostName]
	r.mu.Unlock()
	if h == nil {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "machine %q not found", id)
	}
	if err := rebuildable(h, files); err != nil {
		return nil, err
	}
	drive := ""
	if fb := req.GetFirstBoot(); fb != nil && !proto.Equal(fb, cur.Spec.GetFirstBoot()) {
		hardware, err := r.hostHardware(ctx, h, next.GetFirstBoot().GetHardwareMetaData())
		if err != nil {
			return nil, err
		}
		secret, err := configDriveSecret(r.opts.Namespace, id, cur.Metadata.Labels, next, hardware)
		if err != nil {
			return nil, mri.Invalidf("config drive: %v", err)
		}
		secret.Name = reimageDriveName(cur.Metadata.Labels[mri.LabelMachineUID], cur.Metadata.Generation+1, secret.Data)
		r.startWriting(secret)
		defer r.doneWriting(secret.Name)
		if err := r.writeSecret(ctx, secret); err != nil {
			return nil, unavailable("writing the config drive", err)
		}
		drive = secret.Name
	}
	m, err := r.mutate(ctx, id, func(h *metalv1alpha1.Host, rec *record, spec *mriv1alpha1.MachineSpec) (bool, error) {
		if rec.DeletedAt != 0 {
			return false, mri.Invalidf("machine %s is being deleted", id)
		}
		if spec.FirstBoot != nil {
			r.mu.Lock()
			spec.FirstBoot.Data = r.drives[rec.drive()]
			r.mu.Unlock()
		}
		if !mutate.Reimage(spec, req.GetImage(), req.GetFirstBoot()) {
			return false, nil
		}
		h.Spec.Image = files.hostImage(r.fileURL)
		if drive != "" {
			h.Spec.ConfigDrive = &metalv1alpha1.SecretReference{Name: drive}
			rec.ConfigDrive = drive
		}
		// The token names the consumer, which keeps its server, and the generation this
		// update makes: each reimage is one rebuild.
		h.Annotations[metalv1alpha1.AnnotationRebuild] = metalv1alpha1.RebuildToken(h.Spec.ConsumerRef.UID, rec.Generation+1)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if drive != "" {
		// The config drive replaced is swept once the Host controller surely reads the new.
		r.queue.AddAfter(sweepKey, r.opts.sweepGrace)
	}
	r.opts.Logger.Info("machine reimaging", "machine", id, "host", hostName, "image", req.GetImage().GetReference(),
		"digest", req.GetImage().GetDigest(), "newConfigDrive", drive != "")
	return &mriv1alpha1.ReimageMachineResponse{Machine: m}, nil
}

// rebuildable refuses a reimage the Host's server cannot take in place: from a disk image
// to a kernel and initramfs or back, which a real server's provisioner (Ironic) deploys
// with another deploy interface, one it switches only on a server not deployed. Fake
// hardware deploys both alike.
func rebuildable(h *metalv1alpha1.Host, files bootFiles) error {
	ramdisk := files.Disk.Hex == ""
	if h.Spec.Image == nil || h.Spec.Image.Ramdisk() == ramdisk || strings.HasPrefix(h.Spec.BMC.Address, "fake:") {
		return nil
	}
	kinds := map[bool]string{false: "a disk image", true: "a kernel and initramfs booted from RAM"}
	return mri.Invalidf("the machine's server runs %s and the new image is %s: a server is not switched between the two in place; "+
		"delete the Machine and create it with the new image instead", kinds[!ramdisk], kinds[ramdisk])
}

// hostHardware resolves a reimage's hardware references from the HardwareData of the Host
// the machine keeps (MRI rule F2); a reference that Host cannot answer is refused, since
// the machine does not move to another.
func (r *Runtime) hostHardware(ctx context.Context, h *metalv1alpha1.Host, refs []*mriv1alpha1.HardwareMetaData) (map[string]string, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	hd := &metalv1alpha1.HardwareData{}
	if err := r.opts.Cache.Get(ctx, client.ObjectKeyFromObject(h), hd); client.IgnoreNotFound(err) != nil {
		return nil, unavailable("reading the HardwareData of Host "+h.Name, err)
	}
	values, err := mri.ResolveHardware(refs, placement.HardwareNames(&hd.Spec))
	if err != nil {
		return nil, mri.Invalidf("the machine's server cannot answer spec.first_boot.hardware_meta_data: %v: name a NIC or disk it has", err)
	}
	return values, nil
}
