package mutate

import (
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
