package mutate

import (
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// SetPower sets the wanted power; false when it already was p.
func SetPower(spec *mriv1alpha1.MachineSpec, p mriv1alpha1.Power) bool {
	if spec.Power == p {
		return false
	}
	spec.Power = p
	return true
}

// Reimage sets the spec's image, and its first-boot config when fb is not nil; false when
// both already are so (E3).
func Reimage(spec *mriv1alpha1.MachineSpec, img *mriv1alpha1.Image, fb *mriv1alpha1.FirstBootConfig) bool {
	if proto.Equal(spec.Image, img) && (fb == nil || proto.Equal(spec.FirstBoot, fb)) {
		return false
	}
	spec.Image = proto.Clone(img).(*mriv1alpha1.Image)
	if fb != nil {
		spec.FirstBoot = proto.Clone(fb).(*mriv1alpha1.FirstBootConfig)
	}
	return true
}

// SetLabels replaces the labels with labels, keeping the machine-uid label whatever the
// caller sent, as CreateMachine is idempotent on it (I2); false when nothing changes.
func SetLabels(md *mriv1alpha1.ObjectMetadata, labels map[string]string) bool {
	next := make(map[string]string, len(labels)+1)
	maps.Copy(next, labels)
	next[mri.LabelMachineUID] = md.Labels[mri.LabelMachineUID]
	if maps.Equal(next, md.Labels) {
		return false
	}
	md.Labels = next
	return true
}

// AttachVolume adds a copy of v to the spec; false when it is attached as it is, and
// ALREADY_EXISTS when its name is attached with another source.
func AttachVolume(spec *mriv1alpha1.MachineSpec, v *mriv1alpha1.Volume) (bool, error) {
	return attach(&spec.Volumes, v, "volume %q is attached with another source")
}

// DetachVolume removes the volume called name; false when there is none.
func DetachVolume(spec *mriv1alpha1.MachineSpec, name string) bool {
	return detach(&spec.Volumes, name)
}

// AttachNetworkInterface adds a copy of n to the spec; false when it is attached as it
// is, and ALREADY_EXISTS when its name is attached with other settings.
func AttachNetworkInterface(spec *mriv1alpha1.MachineSpec, n *mriv1alpha1.NetworkInterface) (bool, error) {
	return attach(&spec.NetworkInterfaces, n, "network interface %q is attached with other settings")
}

// DetachNetworkInterface removes the network interface called name; false when there
// is none.
func DetachNetworkInterface(spec *mriv1alpha1.MachineSpec, name string) bool {
	return detach(&spec.NetworkInterfaces, name)
}

// named is a volume or a network interface: attached by name, one of each name.
type named interface {
	proto.Message
	GetName() string
}

func attach[T named](list *[]T, item T, conflict string) (bool, error) {
	for _, have := range *list {
		if have.GetName() != item.GetName() {
			continue
		}
		if proto.Equal(have, item) {
			return false, nil
		}
		return false, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, conflict, item.GetName())
	}
	*list = append(*list, proto.Clone(item).(T))
	return true, nil
}

func detach[T named](list *[]T, name string) bool {
	i := slices.IndexFunc(*list, func(have T) bool { return have.GetName() == name })
	if i < 0 {
		return false
	}
	*list = slices.Delete(*list, i, i+1)
	return true
}
