package broker

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
)

// imageTimeout bounds the synchronous read of the image's manifests at create.
const imageTimeout = 10 * time.Second

// CreateMachine makes the downstream Machine of an upstream machine: idempotent on the
// uid label (the Machine is named by it, so a retried or restarted create finds it), it
// refuses before writing anything what cannot run (class, image, capacity), writes the
// first-boot Secret, then the Machine; a Machine the downstream refuses takes its Secret
// with it.
func (r *Runtime) CreateMachine(ctx context.Context, req *mriv1alpha1.CreateMachineRequest) (*mriv1alpha1.CreateMachineResponse, error) {
	in := req.GetMachine()
	if err := mri.ValidateCreate(in); err != nil {
		return nil, err
	}
	d, err := mapping.NewDownstream(r.target, in)
	if err != nil {
		return nil, refusal(err)
	}
	if err := r.AwaitReady(ctx); err != nil {
		return nil, err
	}
	name := d.Machine.Name
	if m := r.view(name); m != nil {
		return &mriv1alpha1.CreateMachineResponse{Machine: m}, nil // made already (I2)
	}
	spec := in.GetSpec()
	arch := mri.ArchFromMRI(spec.GetArchitecture())
	class := &computev1alpha1.MachineClass{}
	if err := r.opts.Cache.Get(ctx, client.ObjectKey{Name: spec.GetClass()}, class); apierrors.IsNotFound(err) {
		class = nil
	} else if err != nil {
		return nil, unavailable("reading MachineClass "+spec.GetClass(), err)
	}
	if m, err := r.admit(ctx, d, spec, class); m != nil || err != nil {
		return &mriv1alpha1.CreateMachineResponse{Machine: m}, err
	}
	defer r.release(name)
	if err := r.checkImage(ctx, spec.GetImage(), arch); err != nil {
		return nil, err
	}
	created, err := r.write(ctx, d)
	if err != nil {
		return nil, err
	}
	r.observe(created)
	m, _, err := r.machine(string(created.UID))
	if err != nil {
		return nil, unavailable("reading back the Machine made", err)
	}
	r.opts.Logger.Info("machine created", "machine", m.Metadata.Id, "downstream", created.Name)
	return &mriv1alpha1.CreateMachineResponse{Machine: m}, nil
}

// admit holds the room the machine takes, one create at a time, so that two never take
// the same: the machine an earlier create made (I2) is returned instead, a create of it
// still under way is UNAVAILABLE (the caller retries), one that does not fit is refused.
// What it holds counts in every later admission until release.
//
// The API server is asked for an earlier create's Machine before the lock: held over a
// round trip, the lock would let one create through per round trip, whatever the
// caller's concurrency. A create of the same machine that ends between that read and the
// lock is in the runtime's own objects by then (CreateMachine observes what it wrote
// before it releases), so the lock checks them.
func (r *Runtime) admit(ctx context.Context, d mapping.Downstream, spec *mriv1alpha1.MachineSpec, class *computev1alpha1.MachineClass) (*mriv1alpha1.Machine, error) {
	name := d.Machine.Name
	if m, err := r.existing(ctx, name); m != nil || err != nil {
		return m, err
	}
	r.createMu.Lock()
	defer r.createMu.Unlock()
	r.mu.Lock()
	_, busy := r.creating[name]
	r.mu.Unlock()
	if busy {
		return nil, status.Errorf(codes.Unavailable, "broker runtime: a create of machine %s is under way", name)
	}
	if m := r.view(name); m != nil {
		return m, nil
	}
	site, err := r.site(ctx)
	if err != nil {
		return nil, err
	}
	if ref := site.Admit(mri.ArchFromMRI(spec.GetArchitecture()), spec.GetPlacement().GetNativeOnly(), mapping.Demand(spec)); ref != nil {
		reason := mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY
		if ref.Reason == mapping.RefusedArchitecture {
			reason = mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE
		}
		return nil, mri.Errorf(reason, "pool %s: %s", r.opts.PoolName, ref.Message)
	}
	if err := mapping.MatchClass(class, spec); err != nil {
		return nil, refusal(err)
	}
	r.mu.Lock()
	r.creating[name] = d.Machine
	r.mu.Unlock()
	return nil, nil
}

// release ends a create: its Machine counts from the informer's (or this runtime's) copy
// now, or not at all; a Secret left by a create that failed goes.
func (r *Runtime) release(name string) {
	r.mu.Lock()
	delete(r.creating, name)
	r.mu.Unlock()
	r.secrets.Add(name)
}

// existing is the machine a previous create made under name, nil when there is none. The
// API server is asked, not the cache: a create answered just before a restart may not be
// in the cache yet.
func (r *Runtime) existing(ctx context.Context, name string) (*mriv1alpha1.Machine, error) {
	obj := &computev1alpha1.Machine{}
	err := r.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("looking for the Machine of an earlier create", err)
	}
	if !r.owned(obj) {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_ALREADY_EXISTS,
			"downstream Machine %s/%s exists and is not this broker's (label %s)", r.opts.Namespace, name, mapping.LabelPool)
	}
	if s := (&corev1.Secret{}); obj.Spec.IgnitionRef != nil || obj.Spec.UserDataRef != nil {
		if err := r.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: name}, s); err == nil {
			r.observeData(name, s.Data)
		}
	}
	r.observe(obj)
	m, _, err := r.machine(string(obj.UID))
	return m, err
}

// write creates the Secret, then the Machine; a Machine not made deletes the Secret.
// The caller holds the room (admit).
func (r *Runtime) write(ctx context.Context, d mapping.Downstream) (*computev1alpha1.Machine, error) {
	name := d.Machine.Name
	if d.Secret != nil {
		err := r.opts.Client.Create(ctx, d.Secret.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			// An earlier create that failed left it: it gets this create's data.
			err = r.opts.Client.Update(ctx, d.Secret.DeepCopy())
		}
		if err != nil {
			return nil, downstreamError("writing the first-boot Secret", err)
		}
		r.observeData(name, d.Secret.Data)
	}
	obj := d.Machine.DeepCopy()
	if err := r.opts.Client.Create(ctx, obj); err != nil {
		if d.Secret != nil {
			if derr := client.IgnoreNotFound(r.opts.Client.Delete(context.WithoutCancel(ctx), d.Secret.DeepCopy())); derr != nil {
				r.opts.Logger.Error(derr, "deleting the first-boot Secret of a Machine not made; the sweep retries", "secret", name)
			}
		}
		return nil, downstreamError("creating the Machine", err)
	}
	return obj, nil
}

// checkImage refuses, before anything is written, an image that does not exist or has
// no entry for the architecture, so the caller can place the machine elsewhere.
func (r *Runtime) checkImage(ctx context.Context, img *mriv1alpha1.Image, arch computev1alpha1.Architecture) error {
	ctx, cancel := context.WithTimeout(ctx, imageTimeout)
	defer cancel()
	_, err := r.opts.Images.Entry(ctx, img.GetReference(), img.GetDigest(), arch)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, osimage.ErrImageNotFound):
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_IMAGE_NOT_FOUND, "image %s@%s: %v", img.GetReference(), img.GetDigest(), err)
	case errors.Is(err, osimage.ErrWrongArchitecture):
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE, "%v", err)
	case errors.Is(err, osimage.ErrNotOSImage), errors.Is(err, osimage.ErrBadReference):
		return mri.Invalidf("%v", err)
	}
	return unavailable("reading the image's manifests", err)
}

// refusal is a mapping error as the MRI says it: what cannot cross a broker is INVALID.
func refusal(err error) error {
	if errors.Is(err, mapping.ErrInvalid) {
		return mri.Invalidf("%v", err)
	}
	return unavailable("mapping the machine", err)
}

// downstreamError is a failed downstream write: what the downstream API refuses as
// invalid is INVALID with its message (the caller may place the machine elsewhere);
// anything else is retried.
func downstreamError(what string, err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return mri.Invalidf("the downstream refused %s: %v", what, err)
	}
	return unavailable(what, err)
}
