package metal

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/mutate"
)

// change edits a machine's Host, record and spec; it reports whether anything changed.
type change func(h *metalv1alpha1.Host, rec *record, spec *mriv1alpha1.MachineSpec) (bool, error)

// mutate applies change to the Host of machine id as read from the API server, retrying
// on conflicts; a change bumps the generation (CONTRACT.md E4). A call that changes
// nothing writes nothing (E3).
func (r *Runtime) mutate(ctx context.Context, id string, fn change) (*mriv1alpha1.Machine, error) {
	if err := r.AwaitReady(ctx); err != nil {
		return nil, err
	}
	var written *metalv1alpha1.Host
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		_, name, err := r.machine(id)
		if err != nil {
			return err
		}
		h := &metalv1alpha1.Host{}
		if err := r.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: name}, h); err != nil {
			if apierrors.IsNotFound(err) {
				return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "machine %q not found", id)
			}
			return err
		}
		rec, spec, err := decodeRecord(h)
		if err != nil || rec == nil || rec.ID != id {
			return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "machine %q not found", id)
		}
		changed, err := fn(h, rec, spec)
		if err != nil || !changed {
			return err
		}
		rec.Generation++
		if err := encodeRecord(h, rec, spec); err != nil {
			return status.Errorf(codes.Internal, "machine %s: %v", id, err)
		}
		if err := r.opts.Client.Update(ctx, h); err != nil {
			return err
		}
		written = h
		return nil
	})
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, unavailable("updating machine "+id, err)
	}
	if written != nil {
		r.assume(written)
		r.queue.Add(written.Name)
	}
	m, _, err := r.machine(id)
	return m, err
}

// DeleteMachine clears the Host's image and config drive, which makes the Host
// controller deprovision it, and its power intent, so the freed server stays off; the Run
// loop releases the Host once it is Available again, and the machine is gone.
func (r *Runtime) DeleteMachine(ctx context.Context, req *mriv1alpha1.DeleteMachineRequest) (*mriv1alpha1.DeleteMachineResponse, error) {
	_, err := r.mutate(ctx, req.GetId(), func(h *metalv1alpha1.Host, rec *record, _ *mriv1alpha1.MachineSpec) (bool, error) {
		if rec.DeletedAt != 0 {
			return false, nil
		}
		rec.DeletedAt = time.Now().UnixNano()
		h.Spec.Image, h.Spec.ConfigDrive, h.Spec.Online = nil, nil, false
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	r.opts.Logger.Info("machine deleting", "machine", req.GetId())
	return &mriv1alpha1.DeleteMachineResponse{}, nil
}

func (r *Runtime) UpdateMachinePower(ctx context.Context, req *mriv1alpha1.UpdateMachinePowerRequest) (*mriv1alpha1.UpdateMachinePowerResponse, error) {
	if err := mutate.CheckPower(req.GetPower()); err != nil {
		return nil, err
	}
	m, err := r.mutate(ctx, req.GetId(), func(h *metalv1alpha1.Host, _ *record, spec *mriv1alpha1.MachineSpec) (bool, error) {
		if !mutate.SetPower(spec, req.GetPower()) {
			return false, nil
		}
		h.Spec.Online = req.GetPower() == mriv1alpha1.Power_POWER_ON
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.UpdateMachinePowerResponse{Machine: m}, nil
}

// RebootMachine asks the Host controller for one reset per token, through the Host's
// AnnotationReboot. The token is reported as soon as it is on the Host: the request
// survives any restart from then on.
func (r *Runtime) RebootMachine(ctx context.Context, req *mriv1alpha1.RebootMachineRequest) (*mriv1alpha1.RebootMachineResponse, error) {
	if err := mutate.CheckRebootToken(req.GetToken()); err != nil {
		return nil, err
	}
	m, err := r.mutate(ctx, req.GetId(), func(h *metalv1alpha1.Host, _ *record, _ *mriv1alpha1.MachineSpec) (bool, error) {
		if h.Annotations[AnnotationReboot] == req.GetToken() {
			return false, nil
		}
		h.Annotations[AnnotationReboot] = req.GetToken()
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.RebootMachineResponse{Machine: m}, nil
}

func (r *Runtime) UpdateMachineLabels(ctx context.Context, req *mriv1alpha1.UpdateMachineLabelsRequest) (*mriv1alpha1.UpdateMachineLabelsResponse, error) {
	m, err := r.mutate(ctx, req.GetId(), func(_ *metalv1alpha1.Host, rec *record, _ *mriv1alpha1.MachineSpec) (bool, error) {
		md := &mriv1alpha1.ObjectMetadata{Labels: rec.Labels}
		if !mutate.SetLabels(md, req.GetLabels()) {
			return false, nil
		}
		rec.Labels = md.Labels
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.UpdateMachineLabelsResponse{Machine: m}, nil
}

// A server's disks and NICs are its own: nothing is plugged into or out of a bare-metal
// machine once it exists. Attaching what the machine already has, or detaching what it
// never had, succeeds and changes nothing (CONTRACT.md E3); anything else is INVALID with
// these messages (the Runtime's mutate.Fixed).

const (
	noVolumeHotplug = "a bare-metal machine cannot attach or detach volumes; its disks are the server's own"
	noNICHotplug    = "a bare-metal machine cannot attach or detach network interfaces; its NICs are the server's own"
)
