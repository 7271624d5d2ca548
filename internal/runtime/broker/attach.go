package broker

import (
	"context"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri/mutate"
)

// A downstream Machine's volumes and NICs cannot change once it is bound (its CRD says
// so), so a brokered machine has no hot-plug (CONTRACT.md E6): attaching what the machine
// already has, or detaching what it never had, succeeds and changes nothing (E3);
// anything else is INVALID.
const (
	noVolumeHotplug = "the downstream Machine's volumes cannot change once it is bound: delete and recreate the machine with the volumes it needs"
	noNICHotplug    = "the downstream Machine's network interfaces cannot change once it is bound: delete and recreate the machine with the network interfaces it needs"
)

func (r *Runtime) AttachVolume(ctx context.Context, req *mriv1alpha1.AttachVolumeRequest) (*mriv1alpha1.AttachVolumeResponse, error) {
	m, err := r.unchanged(ctx, req.GetId(), func(spec *mriv1alpha1.MachineSpec) error {
		return mutate.CheckAttachFixedVolume(spec, req.GetVolume(), noVolumeHotplug)
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.AttachVolumeResponse{Machine: m}, nil
}

func (r *Runtime) DetachVolume(ctx context.Context, req *mriv1alpha1.DetachVolumeRequest) (*mriv1alpha1.DetachVolumeResponse, error) {
	m, err := r.unchanged(ctx, req.GetId(), func(spec *mriv1alpha1.MachineSpec) error {
		return mutate.CheckDetachFixedVolume(spec, req.GetName(), noVolumeHotplug)
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.DetachVolumeResponse{Machine: m}, nil
}

func (r *Runtime) AttachNetworkInterface(ctx context.Context, req *mriv1alpha1.AttachNetworkInterfaceRequest) (*mriv1alpha1.AttachNetworkInterfaceResponse, error) {
	m, err := r.unchanged(ctx, req.GetId(), func(spec *mriv1alpha1.MachineSpec) error {
		return mutate.CheckAttachFixedNetworkInterface(spec, req.GetNetworkInterface(), noNICHotplug)
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.AttachNetworkInterfaceResponse{Machine: m}, nil
}

func (r *Runtime) DetachNetworkInterface(ctx context.Context, req *mriv1alpha1.DetachNetworkInterfaceRequest) (*mriv1alpha1.DetachNetworkInterfaceResponse, error) {
	m, err := r.unchanged(ctx, req.GetId(), func(spec *mriv1alpha1.MachineSpec) error {
		return mutate.CheckDetachFixedNetworkInterface(spec, req.GetName(), noNICHotplug)
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.DetachNetworkInterfaceResponse{Machine: m}, nil
}

// unchanged answers a call that can only confirm what the machine already is.
func (r *Runtime) unchanged(ctx context.Context, id string, check func(*mriv1alpha1.MachineSpec) error) (*mriv1alpha1.Machine, error) {
	if err := r.awaitReady(ctx); err != nil {
		return nil, err
	}
	m, _, err := r.machine(id)
	if err != nil {
		return nil, err
	}
	if err := check(m.GetSpec()); err != nil {
		return nil, err
	}
	return m, nil
}
