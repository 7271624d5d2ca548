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
	return r.fixed().AttachVolume(ctx, req)
}

func (r *Runtime) DetachVolume(ctx context.Context, req *mriv1alpha1.DetachVolumeRequest) (*mriv1alpha1.DetachVolumeResponse, error) {
	return r.fixed().DetachVolume(ctx, req)
}

func (r *Runtime) AttachNetworkInterface(ctx context.Context, req *mriv1alpha1.AttachNetworkInterfaceRequest) (*mriv1alpha1.AttachNetworkInterfaceResponse, error) {
	return r.fixed().AttachNetworkInterface(ctx, req)
}

func (r *Runtime) DetachNetworkInterface(ctx context.Context, req *mriv1alpha1.DetachNetworkInterfaceRequest) (*mriv1alpha1.DetachNetworkInterfaceResponse, error) {
	return r.fixed().DetachNetworkInterface(ctx, req)
}

// fixed answers the calls above: a bound downstream Machine keeps its volumes and NICs.
func (r *Runtime) fixed() mutate.Fixed {
	return mutate.Fixed{NoVolumeHotplug: noVolumeHotplug, NoNICHotplug: noNICHotplug,
		Machine: func(ctx context.Context, id string) (*mriv1alpha1.Machine, error) {
			if err := r.awaitReady(ctx); err != nil {
				return nil, err
			}
			m, _, err := r.machine(id)
			return m, err
		}}
}
