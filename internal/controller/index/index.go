package index

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imagebuild"
)

const (
	// MachineVolumeRefs indexes Machines by the Volumes their spec.volumes[].volumeRef name.
	MachineVolumeRefs = "spec.volumes.volumeRef.name"
	// MachineNetworkInterfaceRefs indexes Machines by the NetworkInterfaces they reference.
	MachineNetworkInterfaceRefs = "spec.networkInterfaces.networkInterfaceRef.name"
	// MachinePool indexes Machines by the pool they are bound to.
	MachinePool = "spec.machinePoolRef.name"
	// MachineImageTag indexes Machines by the tag spec.image names (imagebuild.TagName).
	MachineImageTag = "spec.image.tag"
	// OSImageOutputTag indexes OSImages by their output tag, spelled the same way.
	OSImageOutputTag = "spec.output.tag"
	// OSImageContextRefs indexes OSImages by the ConfigMaps and Secrets of their context,
	// as ContextRef spells them.
	OSImageContextRefs = "spec.context.ref"
)

// ContextRef names a ConfigMap or Secret (kind "ConfigMap" or "Secret") for
// OSImageContextRefs.
func ContextRef(kind, name string) string { return kind + "/" + name }

// ContextRefs lists the ConfigMaps and Secrets the OSImage's context reads.
func ContextRefs(o *imagesv1alpha1.OSImage) []string {
	var refs []string
	for _, f := range o.Spec.Context {
		switch {
		case f.ConfigMapKeyRef != nil:
			refs = append(refs, ContextRef("ConfigMap", f.ConfigMapKeyRef.Name))
		case f.SecretKeyRef != nil:
			refs = append(refs, ContextRef("Secret", f.SecretKeyRef.Name))
		}
	}
	return refs
}

// OutputTag is the OSImage's output as one tag name.
func OutputTag(o *imagesv1alpha1.OSImage) string {
	return imagebuild.TagName(o.Spec.Output.Repository + ":" + o.Spec.Output.Tag)
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// EphemeralName is the name of the Volume or NetworkInterface created for the ephemeral
// template named device of Machine machine.
func EphemeralName(machine, device string) string { return machine + "-" + device }

// VolumeRefs returns the names of the Volumes m uses: referenced ones and its ephemeral ones.
func VolumeRefs(m *computev1alpha1.Machine) []string {
	var names []string
	for _, v := range m.Spec.Volumes {
		switch {
		case v.VolumeRef != nil:
			names = append(names, v.VolumeRef.Name)
		case v.Ephemeral != nil:
			names = append(names, EphemeralName(m.Name, v.Name))
		}
	}
	return names
}

// NetworkInterfaceRefs returns the names of the NetworkInterfaces m uses, referenced and
// ephemeral.
func NetworkInterfaceRefs(m *computev1alpha1.Machine) []string {
	var names []string
	for _, n := range m.Spec.NetworkInterfaces {
		switch {
		case n.NetworkInterfaceRef != nil:
			names = append(names, n.NetworkInterfaceRef.Name)
		case n.Ephemeral != nil:
			names = append(names, EphemeralName(m.Name, n.Name))
		}
	}
	return names
}

// Register adds every index to the manager's cache.
func Register(ctx context.Context, fi client.FieldIndexer) error {
	for field, extract := range map[string]func(*computev1alpha1.Machine) []string{
		MachineVolumeRefs:           VolumeRefs,
		MachineNetworkInterfaceRefs: NetworkInterfaceRefs,
		MachinePool: func(m *computev1alpha1.Machine) []string {
			if m.Spec.MachinePoolRef == nil {
				return nil
			}
			return []string{m.Spec.MachinePoolRef.Name}
		},
		MachineImageTag: func(m *computev1alpha1.Machine) []string { return nonEmpty(imagebuild.TagName(m.Spec.Image)) },
	} {
		extract := extract
		if err := fi.IndexField(ctx, &computev1alpha1.Machine{}, field, func(o client.Object) []string {
			m, ok := o.(*computev1alpha1.Machine)
			if !ok {
				return nil
			}
			return extract(m)
		}); err != nil {
			return err
		}
	}
	for field, extract := range map[string]func(*imagesv1alpha1.OSImage) []string{
		OSImageOutputTag:   func(o *imagesv1alpha1.OSImage) []string { return nonEmpty(OutputTag(o)) },
		OSImageContextRefs: ContextRefs,
	} {
		extract := extract
		if err := fi.IndexField(ctx, &imagesv1alpha1.OSImage{}, field, func(o client.Object) []string {
			if osi, ok := o.(*imagesv1alpha1.OSImage); ok {
				return extract(osi)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
