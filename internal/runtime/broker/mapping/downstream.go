package mapping

import (
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Target is where and for whom the broker makes downstream objects.
type Target struct {
	// Namespace is the downstream namespace.
	Namespace string
	// Pool is the upstream pool the broker serves (LabelPool).
	Pool string
	// PoolSelector becomes every Machine's machinePoolSelector (--pool-selector).
	PoolSelector map[string]string
}

// Downstream is what the broker makes downstream for one upstream machine.
type Downstream struct {
	Machine *computev1alpha1.Machine
	// Secret holds the first-boot data; nil when the format is NONE (nothing to hold).
	Secret *corev1.Secret
}

// NewDownstream is the downstream Machine and first-boot Secret for the upstream machine
// m, the Machine's record written for its first generation. m has passed
// mri.ValidateCreate; what it asks that cannot cross a broker is ErrInvalid.
func NewDownstream(t Target, m *mriv1alpha1.Machine) (Downstream, error) {
	objName, err := Name(m.GetMetadata().GetLabels())
	if err != nil {
		return Downstream{}, err
	}
	spec, err := MachineSpec(t, objName, m.GetSpec())
	if err != nil {
		return Downstream{}, err
	}
	meta := metav1.ObjectMeta{Name: objName, Namespace: t.Namespace, Labels: ObjectLabels(t.Pool, objName)}
	if up := upstreamOf(m); up != "" {
		meta.Annotations = map[string]string{AnnotationUpstream: up}
	}
	machine := &computev1alpha1.Machine{ObjectMeta: *meta.DeepCopy(), Spec: spec}
	rec := Record{Labels: m.GetMetadata().GetLabels(), Annotations: m.GetMetadata().GetAnnotations(),
		Generation: 1, DownstreamGeneration: 1}
	if err := SetRecord(machine, rec, m.GetSpec()); err != nil {
		return Downstream{}, err
	}
	out := Downstream{Machine: machine}
	if data := SecretData(m.GetSpec().GetFirstBoot()); data != nil {
		out.Secret = &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque, Data: data}
	}
	return out, nil
}

// SetRecord writes rec, with spec, in the Machine's AnnotationRecord.
func SetRecord(m *computev1alpha1.Machine, rec Record, spec *mriv1alpha1.MachineSpec) error {
	v, err := EncodeRecord(rec, spec)
	if err != nil {
		return err
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[AnnotationRecord] = v
	return nil
}

// MachineSpec is the downstream Machine's spec for the upstream spec s, its first-boot
// Secret named secret.
func MachineSpec(t Target, secret string, s *mriv1alpha1.MachineSpec) (computev1alpha1.MachineSpec, error) {
	image, err := ImageReference(s.GetImage())
	if err != nil {
		return computev1alpha1.MachineSpec{}, err
	}
	vols, err := volumes(s.GetVolumes())
	if err != nil {
		return computev1alpha1.MachineSpec{}, err
	}
	out := computev1alpha1.MachineSpec{
		MachineClassRef:     computev1alpha1.MachineClassReference{Name: s.GetClass()},
		Image:               image,
		ImageUpdatePolicy:   computev1alpha1.ImageUpdatePolicyReimage,
		Architecture:        mri.ArchFromMRI(s.GetArchitecture()),
		MachinePoolSelector: t.PoolSelector,
		HostSelector:        hostSelector(s),
		Power:               Power(s.GetPower()),
		Hostname:            s.GetHostname(),
		MetaData:            s.GetFirstBoot().GetMetaData(),
		HardwareMetaData:    hardwareMetaData(s.GetFirstBoot().GetHardwareMetaData()),
		Volumes:             vols,
		NetworkInterfaces:   nics(s.GetNetworkInterfaces()),
	}
	out.Tolerations, out.Emulation = mri.PlacementFromMRI(s.GetPlacement())
	SetFirstBootRefs(&out, secret, s.GetFirstBoot().GetFormat())
	return out, nil
}

// ImageReference is the image pinned to the digest the caller resolved, so the
// downstream boots exactly what the upstream resolved and never resolves a tag again.
func ImageReference(img *mriv1alpha1.Image) (string, error) {
	ref, err := name.ParseReference(img.GetReference())
	if err != nil {
		return "", invalidf("image.reference %q: %v", img.GetReference(), err)
	}
	pinned := ref.Context().Name() + "@" + img.GetDigest()
	if _, err := name.NewDigest(pinned); err != nil {
		return "", invalidf("image.digest %q: %v", img.GetDigest(), err)
	}
	return pinned, nil
}

// Power is the downstream spec.power of an MRI power; the MRI refuses UNSPECIFIED
// before it gets here.
func Power(p mriv1alpha1.Power) computev1alpha1.Power {
	if p == mriv1alpha1.Power_POWER_OFF {
		return computev1alpha1.PowerOff
	}
	return computev1alpha1.PowerOn
}

// SetFirstBootRefs points the spec at the first-boot Secret under the key of format.
func SetFirstBootRefs(spec *computev1alpha1.MachineSpec, secret string, format mriv1alpha1.ConfigFormat) {
	spec.IgnitionRef, spec.UserDataRef = nil, nil
	switch format {
	case mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION:
		spec.IgnitionRef = &computev1alpha1.SecretKeySelector{Name: secret, Key: computev1alpha1.DefaultIgnitionKey}
	case mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT:
		spec.UserDataRef = &computev1alpha1.SecretKeySelector{Name: secret, Key: computev1alpha1.DefaultUserDataKey}
	}
}

// SecretData is the first-boot Secret's data; nil when the format carries no data.
func SecretData(fb *mriv1alpha1.FirstBootConfig) map[string][]byte {
	key := secretKey(fb.GetFormat())
	if key == "" {
		return nil
	}
	return map[string][]byte{key: fb.GetData()}
}

func secretKey(f mriv1alpha1.ConfigFormat) string {
	switch f {
	case mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION:
		return computev1alpha1.DefaultIgnitionKey
	case mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT:
		return computev1alpha1.DefaultUserDataKey
	}
	return ""
}

func hostSelector(s *mriv1alpha1.MachineSpec) *metav1.LabelSelector {
	if len(s.GetHostSelector()) == 0 && len(s.GetHostSelectorExpressions()) == 0 {
		return nil
	}
	sel := &metav1.LabelSelector{MatchLabels: s.GetHostSelector()}
	for _, e := range s.GetHostSelectorExpressions() {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: e.GetKey(), Operator: metav1.LabelSelectorOperator(e.GetOperator()), Values: e.GetValues()})
	}
	return sel
}

func hardwareMetaData(in []*mriv1alpha1.HardwareMetaData) []computev1alpha1.HardwareMetaData {
	var out []computev1alpha1.HardwareMetaData
	for _, h := range in {
		f := computev1alpha1.HardwareFieldUnset
		switch h.GetField() {
		case mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS:
			f = computev1alpha1.HardwareNICMACAddress
		case mriv1alpha1.HardwareField_HARDWARE_FIELD_DISK_SERIAL_NUMBER:
			f = computev1alpha1.HardwareDiskSerialNumber
		}
		out = append(out, computev1alpha1.HardwareMetaData{Key: h.GetKey(), Field: f, Name: h.GetName()})
	}
	return out
}

// volumes: the root disk as an image volume, a blank disk as an ephemeral Volume (which
// the downstream makes and deletes with the Machine). A handle names a disk of the
// upstream site, which the downstream cannot reach.
func volumes(in []*mriv1alpha1.Volume) ([]computev1alpha1.MachineVolume, error) {
	var out []computev1alpha1.MachineVolume
	for i, v := range in {
		mv := computev1alpha1.MachineVolume{Name: v.GetName()}
		switch src := v.GetSource().(type) {
		case *mriv1alpha1.Volume_ImageDisk:
			mv.Image = &computev1alpha1.ImageDiskSource{}
			if n := src.ImageDisk.GetSizeBytes(); n > 0 {
				mv.Image.Size = resource.NewQuantity(n, resource.BinarySI)
			}
		case *mriv1alpha1.Volume_EmptyDisk:
			mv.Ephemeral = &computev1alpha1.EphemeralVolumeSource{VolumeTemplate: computev1alpha1.VolumeTemplate{
				Spec: computev1alpha1.VolumeSpec{Size: *resource.NewQuantity(src.EmptyDisk.GetSizeBytes(), resource.BinarySI)}}}
		case *mriv1alpha1.Volume_Handle:
			return nil, invalidf("volumes[%d] (%s): a volume by handle (%q) names a disk of the upstream site: it cannot cross a broker; use an empty disk", i, v.GetName(), src.Handle)
		default:
			return nil, invalidf("volumes[%d] (%s): no source", i, v.GetName())
		}
		out = append(out, mv)
	}
	return out, nil
}

func nics(in []*mriv1alpha1.NetworkInterface) []computev1alpha1.MachineNetworkInterface {
	var out []computev1alpha1.MachineNetworkInterface
	for _, n := range in {
		out = append(out, computev1alpha1.MachineNetworkInterface{Name: n.GetName(),
			Ephemeral: &computev1alpha1.EphemeralNetworkInterfaceSource{NetworkInterfaceTemplate: computev1alpha1.NetworkInterfaceTemplate{
				Spec: computev1alpha1.NetworkInterfaceSpec{Network: n.GetNetwork(), MACAddress: n.GetMacAddress(), IPs: n.GetIps()}}}})
	}
	return out
}
