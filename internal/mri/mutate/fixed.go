package mutate

import (
	"context"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// A runtime whose machines' disks and NICs are fixed once made (CONTRACT.md E6: a bare-metal
// server, a broker's downstream Machine once bound) answers Attach* and Detach* with these:
// nil when the call asks for what the spec already is (E3), INVALID with why otherwise.

// CheckAttachFixedVolume: v must be attached as it is.
func CheckAttachFixedVolume(spec *mriv1alpha1.MachineSpec, v *mriv1alpha1.Volume, why string) error {
	for _, have := range spec.GetVolumes() {
		if have.GetName() == v.GetName() && proto.Equal(have, v) {
			return nil
		}
	}
	return fixed("volume", v.GetName(), why)
}

// CheckDetachFixedVolume: no volume may be called name.
func CheckDetachFixedVolume(spec *mriv1alpha1.MachineSpec, name, why string) error {
	for _, have := range spec.GetVolumes() {
		if have.GetName() == name {
			return fixed("volume", name, why)
		}
	}
	return nil
}

// CheckAttachFixedNetworkInterface: n must be attached as it is.
func CheckAttachFixedNetworkInterface(spec *mriv1alpha1.MachineSpec, n *mriv1alpha1.NetworkInterface, why string) error {
	for _, have := range spec.GetNetworkInterfaces() {
		if have.GetName() == n.GetName() && proto.Equal(have, n) {
			return nil
		}
	}
	return fixed("network interface", n.GetName(), why)
}

// CheckDetachFixedNetworkInterface: no network interface may be called name.
func CheckDetachFixedNetworkInterface(spec *mriv1alpha1.MachineSpec, name, why string) error {
	for _, have := range spec.GetNetworkInterfaces() {
		if have.GetName() == name {
			return fixed("network interface", name, why)
		}
	}
	return nil
}

func fixed(kind, name, why string) error {
	return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "%s %q: %s", kind, name, why)
}

// Fixed serves the four Attach*/Detach* calls of such a runtime: each looks the machine up,
// checks the call against its spec with the Check* above and answers the machine unchanged.
type Fixed struct {
	// Machine is the machine of id as the runtime reports it now (NOT_FOUND when unknown),
	// once the runtime is ready to answer.
	Machine func(ctx context.Context, id string) (*mriv1alpha1.Machine, error)
	// NoVolumeHotplug and NoNICHotplug say why such a machine's volumes and NICs cannot
	// change: the INVALID message of a call that would change them.
	NoVolumeHotplug, NoNICHotplug string
}

func (f Fixed) AttachVolume(ctx context.Context, req *mriv1alpha1.AttachVolumeRequest) (*mriv1alpha1.AttachVolumeResponse, error) {
	m, err := f.unchanged(ctx, req.GetId(), func(spec *mriv1alpha1.MachineSpec) error {
		return CheckAttachFixedVolume(spec, req.GetVolume(), f.NoVolumeHotplug)
	})
	return &mriv1alpha1.AttachVolumeResponse{Machine: m}, err
}

func (f Fixed) DetachVolume(ctx context.Context, req *mriv1alpha1.DetachVolumeRequest) (*mriv1alpha1.DetachVolumeResponse, error) {
	m, err := f.unchanged(ctx, req.GetId(), func(spec *mriv1alpha1.MachineSpec) error {
		return CheckDetachFixedVolume(spec, req.GetName(), f.NoVolumeHotplug)
	})
	return &mriv1alpha1.DetachVolumeResponse{Machine: m}, err
}

func (f Fixed) AttachNetworkInterface(ctx context.Context, req *mriv1alpha1.AttachNetworkInterfaceRequest) (*mriv1alpha1.AttachNetworkInterfaceResponse, error) {
	m, err := f.unchanged(ctx, req.GetId(), func(spec *mriv1alpha1.MachineSpec) error {
		return CheckAttachFixedNetworkInterface(spec, req.GetNetworkInterface(), f.NoNICHotplug)
	})
	return &mriv1alpha1.AttachNetworkInterfaceResponse{Machine: m}, err
}

func (f Fixed) DetachNetworkInterface(ctx context.Context, req *mriv1alpha1.DetachNetworkInterfaceRequest) (*mriv1alpha1.DetachNetworkInterfaceResponse, error) {
	m, err := f.unchanged(ctx, req.GetId(), func(spec *mriv1alpha1.MachineSpec) error {
		return CheckDetachFixedNetworkInterface(spec, req.GetName(), f.NoNICHotplug)
	})
	return &mriv1alpha1.DetachNetworkInterfaceResponse{Machine: m}, err
}

// unchanged is the machine of id when check passes on its spec; the error otherwise.
func (f Fixed) unchanged(ctx context.Context, id string, check func(*mriv1alpha1.MachineSpec) error) (*mriv1alpha1.Machine, error) {
	m, err := f.Machine(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := check(m.GetSpec()); err != nil {
		return nil, err
	}
	return m, nil
}
