package broker

import (
	"context"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/mutate"
)

// DeleteMachine deletes the downstream Machine; the machine stays listed, Terminating,
// until the downstream Machine is gone (its pool's runtime has let it go), and its
// first-boot Secret goes after it.
func (r *Runtime) DeleteMachine(ctx context.Context, req *mriv1alpha1.DeleteMachineRequest) (*mriv1alpha1.DeleteMachineResponse, error) {
	if err := r.AwaitReady(ctx); err != nil {
		return nil, err
	}
	m, name, err := r.machine(req.GetId())
	if err != nil {
		return nil, err
	}
	if m.Metadata.DeletedAtUnixNano != 0 {
		return &mriv1alpha1.DeleteMachineResponse{}, nil // under way (E3)
	}
	dm := &computev1alpha1.Machine{}
	dm.Namespace, dm.Name = r.opts.Namespace, name
	uid := types.UID(req.GetId())
	err = r.opts.Client.Delete(ctx, dm, client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		err = nil // gone, or another object of the name: the informer says which
	}
	if err != nil {
		return nil, downstreamError("deleting machine "+req.GetId(), err)
	}
	r.opts.Logger.Info("machine deleting", "machine", req.GetId(), "downstream", name)
	return &mriv1alpha1.DeleteMachineResponse{}, nil
}

func (r *Runtime) UpdateMachinePower(ctx context.Context, req *mriv1alpha1.UpdateMachinePowerRequest) (*mriv1alpha1.UpdateMachinePowerResponse, error) {
	if err := mutate.CheckPower(req.GetPower()); err != nil {
		return nil, err
	}
	m, err := r.mutate(ctx, req.GetId(), func(m *mriv1alpha1.Machine, _ *string) (bool, error) {
		return mutate.SetPower(m.Spec, req.GetPower()), nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.UpdateMachinePowerResponse{Machine: m}, nil
}

// RebootMachine passes the token on as the downstream Machine's reboot annotation; the
// downstream status.rebootToken, reported as reboot_token, says when it was carried out.
func (r *Runtime) RebootMachine(ctx context.Context, req *mriv1alpha1.RebootMachineRequest) (*mriv1alpha1.RebootMachineResponse, error) {
	if err := mutate.CheckRebootToken(req.GetToken()); err != nil {
		return nil, err
	}
	m, err := r.mutate(ctx, req.GetId(), func(_ *mriv1alpha1.Machine, reboot *string) (bool, error) {
		*reboot = req.GetToken()
		return true, nil // mapping.Update tells a token asked already
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.RebootMachineResponse{Machine: m}, nil
}

// ReimageMachine checks the image as a create does, then moves the downstream Machine's
// image (and first-boot Secret): the downstream reimages it in place.
func (r *Runtime) ReimageMachine(ctx context.Context, req *mriv1alpha1.ReimageMachineRequest) (*mriv1alpha1.ReimageMachineResponse, error) {
	if err := mri.ValidateReimage(req); err != nil {
		return nil, err
	}
	if err := r.AwaitReady(ctx); err != nil {
		return nil, err
	}
	cur, _, err := r.machine(req.GetId())
	if err != nil {
		return nil, err
	}
	if cur.Metadata.DeletedAtUnixNano != 0 {
		return nil, mri.Invalidf("machine %s is being deleted", req.GetId())
	}
	next := proto.Clone(cur.Spec).(*mriv1alpha1.MachineSpec)
	if !mutate.Reimage(next, req.GetImage(), req.GetFirstBoot()) {
		return &mriv1alpha1.ReimageMachineResponse{Machine: cur}, nil // as asked already (E3)
	}
	if err := r.checkImage(ctx, req.GetImage(), mri.ArchFromMRI(next.GetArchitecture())); err != nil {
		return nil, err
	}
	m, err := r.mutate(ctx, req.GetId(), func(m *mriv1alpha1.Machine, _ *string) (bool, error) {
		return mutate.Reimage(m.Spec, req.GetImage(), req.GetFirstBoot()), nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.ReimageMachineResponse{Machine: m}, nil
}

func (r *Runtime) UpdateMachineLabels(ctx context.Context, req *mriv1alpha1.UpdateMachineLabelsRequest) (*mriv1alpha1.UpdateMachineLabelsResponse, error) {
	m, err := r.mutate(ctx, req.GetId(), func(m *mriv1alpha1.Machine, _ *string) (bool, error) {
		return mutate.SetLabels(m.Metadata, req.GetLabels()), nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.UpdateMachineLabelsResponse{Machine: m}, nil
}
