package metal

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/runtime/metal/placement"
)

// imageTimeout bounds the synchronous read of the image's manifests at create.
const imageTimeout = 10 * time.Second

// CreateMachine claims a free Host for the machine: idempotent on the machine-uid label,
// it refuses before claiming anything what cannot run (architecture, image, capacity),
// writes the config-drive Secret, then claims the first fitting Host in name order with
// an update carrying the resourceVersion just read from the API server. A Host taken
// meanwhile is a conflict, and the next one is tried.
func (r *Runtime) CreateMachine(ctx context.Context, req *mriv1alpha1.CreateMachineRequest) (*mriv1alpha1.CreateMachineResponse, error) {
	in := req.GetMachine()
	if err := mri.ValidateCreate(in); err != nil {
		return nil, err
	}
	spec := in.GetSpec()
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	labels := in.GetMetadata().GetLabels()
	uid, ns := labels[mri.LabelMachineUID], labels[LabelMachineNamespace]
	if ns == "" {
		return nil, mri.Invalidf("label %s is required: the namespace decides which Hosts HostPolicies allow", LabelMachineNamespace)
	}
	if err := r.AwaitReady(ctx); err != nil {
		return nil, err
	}
	id := machineID(r.opts.PoolName, uid)
	if m, _, err := r.machine(id); err == nil {
		return &mriv1alpha1.CreateMachineResponse{Machine: m}, nil
	}
	arch := mri.ArchFromMRI(spec.GetArchitecture())
	inv, err := r.inventory(ctx)
	if err != nil {
		return nil, err
	}
	if archs := inv.Capacity().Architectures; !slices.Contains(archs, arch) {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE, "pool %s has Hosts of %v, not %s", r.opts.PoolName, archs, arch)
	}
	files, err := r.resolveBootFiles(ctx, spec.GetImage(), arch)
	if err != nil {
		return nil, err
	}
	nsLabels, err := r.namespaceLabels(ctx, ns)
	if err != nil {
		return nil, err
	}
	hostSelector, err := mri.HostSelector(spec) // checked by ValidateCreate
	if err != nil {
		return nil, mri.Invalidf("%v", err)
	}
	res := spec.GetResources()
	preq := placement.Request{
		Architecture: arch, MilliCPU: res.GetMilliCpu(), MemoryBytes: res.GetMemoryBytes(), Extended: res.GetExtended(),
		Class: spec.GetClass(), HostSelector: hostSelector, Namespace: ns, NamespaceLabels: nsLabels,
		Ramdisk: files.Disk.Hex == "", HardwareMetaData: spec.GetFirstBoot().GetHardwareMetaData(),
	}

	r.claimMu.Lock()
	defer r.claimMu.Unlock()
	if m, _, err := r.machine(id); err == nil { // created meanwhile by a repeated call
		return &mriv1alpha1.CreateMachineResponse{Machine: m}, nil
	}
	if inv, err = r.inventory(ctx); err != nil {
		return nil, err
	}
	candidates, refusal := inv.Candidates(preq)
	if refusal != nil {
		// The tenant reads the message; what it leaves out is for the operators.
		r.opts.Logger.Info("no Host for the machine", "machine", id, "namespace", ns, "reason", refusal.Reason,
			"message", refusal.Message, "detail", refusal.Detail)
		return nil, refuse(r.opts.PoolName, refusal)
	}
	c := &claim{id: id, uid: uid, namespace: ns, labels: labels, annotations: in.GetMetadata().GetAnnotations(), spec: spec, files: files}
	m, host, err := r.claimFirst(ctx, c, inv, preq, candidates)
	if err != nil {
		return nil, err
	}
	r.opts.Logger.Info("machine created", "machine", id, "uid", uid, "namespace", ns, "host", host)
	r.queue.Add(host)
	return &mriv1alpha1.CreateMachineResponse{Machine: m}, nil
}

// claim is one machine being created.
type claim struct {
	id, uid, namespace  string
	labels, annotations map[string]string
	spec                *mriv1alpha1.MachineSpec
	files               bootFiles
}

// claimFirst claims the first candidate still free when read again from the API server,
// writing before each try the config drive the machine gets on that candidate: its hardware
// references resolved from that Host's HardwareData (MRI rule F2), so the first boot
// carries them and the Secret a claim names always holds its own Host's values. The same
// Host gives the same Secret, so a repeated create that claims it writes it alike. Until
// the claim holds, the Secret is this runtime's to remove; after an answer that leaves it
// unknown whether the claim holds, it is kept and the sweep removes it if no Host names
// its machine.
func (r *Runtime) claimFirst(ctx context.Context, c *claim, inv placement.Inventory, preq placement.Request, candidates []*metalv1alpha1.Host) (*mriv1alpha1.Machine, string, error) {
	var written *corev1.Secret
	dropSecret := func() {
		if written == nil {
			return
		}
		if err := r.opts.Client.Delete(context.WithoutCancel(ctx), written); client.IgnoreNotFound(err) != nil {
			r.opts.Logger.Error(err, "config drive of a machine that got no Host not removed; the sweep will", "machine", c.id)
		}
	}
	for _, cand := range candidates {
		hardware, err := inv.HardwareValues(preq, cand)
		if err != nil {
			continue // Candidates keeps only Hosts that answer them
		}
		secret, err := configDriveSecret(r.opts.Namespace, c.id, c.labels, c.spec, hardware)
		if err != nil {
			dropSecret()
			return nil, "", mri.Invalidf("config drive: %v", err)
		}
		if written == nil {
			r.startWriting(secret)
			defer r.doneWriting(secret.Name)
		}
		if written == nil || !maps.EqualFunc(written.Data, secret.Data, bytes.Equal) {
			if err := r.writeSecret(ctx, secret); err != nil {
				dropSecret()
				return nil, "", unavailable("writing the config drive", err)
			}
			written = secret
		}
		h, err := r.tryClaim(ctx, inv, preq, cand, c, secret.Name)
		if err != nil {
			dropSecret()
			return nil, "", err
		}
		if h == nil {
			continue // taken by another machine, changed, or gone
		}
		r.assume(h)
		r.prefetch(h)
		m, _, err := r.machine(c.id)
		if err != nil {
			return nil, "", unavailable("reading back machine "+c.id, err)
		}
		return m, h.Name, nil
	}
	dropSecret()
	return nil, "", mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY,
		"pool %s: every Host that fits was taken by another machine while claiming one", r.opts.PoolName)
}

// claimHost sets on h what makes it the machine's: the consumer, the image served by
// this runtime, the config drive, the power, and the record.
func (r *Runtime) claimHost(h *metalv1alpha1.Host, c *claim, secret string) error {
	h.Spec.ConsumerRef = &metalv1alpha1.ConsumerReference{Namespace: c.namespace, Name: machineName(c.id, c.labels), UID: c.uid}
	h.Spec.Image = c.files.hostImage(r.fileURL)
	h.Spec.ConfigDrive = &metalv1alpha1.SecretReference{Name: secret}
	h.Spec.Online = c.spec.GetPower() == mriv1alpha1.Power_POWER_ON
	delete(h.Annotations, AnnotationReboot)
	delete(h.Annotations, metalv1alpha1.AnnotationRebuild)
	rec := &record{ID: c.id, Labels: c.labels, Annotations: c.annotations, Generation: 1, CreatedAt: time.Now().UnixNano(),
		ConfigDrive: secret}
	return encodeRecord(h, rec, c.spec)
}

// startWriting records a config drive about to be written for a Host update (a claim, a
// reimage): the sweep spares it, and a machine whose record names it reports its data.
func (r *Runtime) startWriting(s *corev1.Secret) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writing[s.Name] = true
	r.drives[s.Name] = s.Data["user_data"]
}

// doneWriting ends startWriting. A drive no machine's record names (the update failed)
// is forgotten; its Secret is the caller's, or the sweep's, to remove.
func (r *Runtime) doneWriting(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.writing, name)
	if !r.drivesInUseLocked()[name] {
		delete(r.drives, name)
	}
}

// drivesInUseLocked are the config drives machines' records name, and those being
// written. mu must be held.
func (r *Runtime) drivesInUseLocked() map[string]bool {
	used := make(map[string]bool, r.Views.Len()+len(r.writing))
	r.Views.Each(func(_ string, _ *mriv1alpha1.Machine, v hostView) { used[v.drive] = true })
	for name := range r.writing {
		used[name] = true
	}
	return used
}

// writeSecret creates the Secret, or replaces the data of the one a repeated or
// interrupted create of the same machine left.
func (r *Runtime) writeSecret(ctx context.Context, s *corev1.Secret) error {
	err := r.opts.Client.Create(ctx, s.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	have := &corev1.Secret{}
	if err := r.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(s), have); err != nil {
		return err
	}
	have.Labels, have.Annotations, have.Data = s.Labels, s.Annotations, s.Data
	return r.opts.Client.Update(ctx, have)
}

// resolveBootFiles finds what a server boots of the image's entry for arch, refusing as
// the qemu runtime does an image that does not exist or lacks the architecture, and one
// with nothing a server can boot.
func (r *Runtime) resolveBootFiles(ctx context.Context, img *mriv1alpha1.Image, a computev1alpha1.Architecture) (bootFiles, error) {
	ctx, cancel := context.WithTimeout(ctx, imageTimeout)
	defer cancel()
	// Manifests and config only, kept in the image cache: the files are pulled after the
	// claim.
	e, err := r.opts.Images.Entry(ctx, img.GetReference(), img.GetDigest(), a)
	if err == nil {
		var b bootFiles
		if b, err = bootFilesOf(e); err == nil {
			return b, nil
		}
	}
	switch {
	case errors.Is(err, osimage.ErrImageNotFound):
		return bootFiles{}, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_IMAGE_NOT_FOUND, "image %s@%s: %v", img.GetReference(), img.GetDigest(), err)
	case errors.Is(err, osimage.ErrWrongArchitecture):
		return bootFiles{}, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE, "%v", err)
	case errors.Is(err, errNotBootable), errors.Is(err, osimage.ErrNotOSImage), errors.Is(err, osimage.ErrBadReference):
		return bootFiles{}, mri.Invalidf("%v", err)
	}
	return bootFiles{}, unavailable("reading the image's manifests", err)
}

// fileURL is where the image server serves the blob of sha256 hex.
func (r *Runtime) fileURL(hex string) string {
	return strings.TrimSuffix(r.imageURL, "/") + imagePath + hex
}

// refuse turns placement's answer into the MRI's: the caller hands the machine back to
// the scheduler.
func refuse(pool string, ref *placement.Refusal) error {
	reason := mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY
	if ref.Reason == placement.ReasonWrongArchitecture {
		reason = mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE
	}
	return mri.Errorf(reason, "pool %s: %s", pool, ref.Message)
}

// validateSpec refuses, after mri.ValidateCreate, what no Host can be given: first-boot
// data larger than a config drive holds or that is not text, and any volume but one image
// disk, since a bare-metal machine has the server's own disks and NICs. It runs before any
// Host is claimed, so such a machine never holds a server only to fail at deploy.
func validateSpec(s *mriv1alpha1.MachineSpec) error {
	if n := len(s.GetFirstBoot().GetData()); n > maxUserData {
		return mri.Invalidf("spec.first_boot.data is %d bytes; a config drive holds at most %d", n, maxUserData)
	}
	if err := configDriveText(userData(s)); err != nil {
		return err
	}
	images := 0
	for _, v := range s.GetVolumes() {
		if v.GetImageDisk() == nil {
			return mri.Invalidf("volume %q: a bare-metal machine has the server's own disks; only the image disk can be given", v.GetName())
		}
		if images++; images > 1 {
			return mri.Invalidf("volume %q: a bare-metal machine has one image disk", v.GetName())
		}
	}
	return nil
}

// claimAttempts bounds how often one Host is read again after a conflicting write: the Host
// controller's own writes (finalizer, annotations) conflict too, and must not make a free
// Host look taken.
const claimAttempts = 3

// tryClaim claims cand for the machine, reading it from the API server each time. It
// returns nil (and no error) when the Host is no longer free for the machine.
func (r *Runtime) tryClaim(ctx context.Context, inv placement.Inventory, preq placement.Request, cand *metalv1alpha1.Host, c *claim, secret string) (*metalv1alpha1.Host, error) {
	for attempt := 0; attempt < claimAttempts; attempt++ {
		h := &metalv1alpha1.Host{}
		if err := r.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(cand), h); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, unavailable("reading Host "+cand.Name, err)
		}
		if !inv.Matches(preq, h) {
			return nil, nil // taken or changed since the cache saw it
		}
		if err := r.claimHost(h, c, secret); err != nil {
			return nil, status.Errorf(codes.Internal, "machine %s: recording it on Host %s: %v", c.id, h.Name, err)
		}
		err := r.opts.Client.Update(ctx, h)
		switch {
		case err == nil:
			return h, nil
		case apierrors.IsNotFound(err):
			return nil, nil
		case apierrors.IsConflict(err):
			r.opts.Logger.V(1).Info("Host changed while claiming it; reading it again", "host", h.Name, "machine", c.id)
			continue
		}
		// The claim may or may not have been written: a repeated create finds out, and
		// the sweep removes the Secret if no Host names the machine.
		r.queue.AddAfter(sweepKey, r.opts.sweepGrace)
		return nil, unavailable("claiming Host "+h.Name, err)
	}
	return nil, nil
}
