package mri

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// ValidateCreate refuses with INVALID a machine no runtime can create: a spec missing
// what the contract needs or an enum left UNSPECIFIED or set to a value the MRI does not
// define (CONTRACT.md E1, E2), or no machine-uid label (I2). It is the contract's check,
// made alike by every runtime; a runtime checks its own limits (architectures, sizes,
// devices) after it.
func ValidateCreate(m *mriv1alpha1.Machine) error {
	if err := validateSpec(m.GetSpec()); err != nil {
		return err
	}
	if m.GetMetadata().GetLabels()[LabelMachineUID] == "" {
		return Invalidf("label %s is required: CreateMachine is idempotent on it", LabelMachineUID)
	}
	return nil
}

func validateSpec(s *mriv1alpha1.MachineSpec) error {
	if s == nil {
		return Invalidf("spec is required")
	}
	if err := checkEnum("spec.power", s.GetPower(), mriv1alpha1.Power_name, "POWER_ON or POWER_OFF"); err != nil {
		return err
	}
	if err := checkEnum("spec.architecture", s.GetArchitecture(), mriv1alpha1.Architecture_name, "AMD64, ARM64, RISCV64, PPC64LE or S390X"); err != nil {
		return err
	}
	if res := s.GetResources(); res.GetMilliCpu() <= 0 || res.GetMemoryBytes() <= 0 {
		return Invalidf("spec.resources needs cpu and memory: set milli_cpu and memory_bytes above zero")
	}
	for k, v := range s.GetResources().GetExtended() {
		// A negative amount would free capacity for the next machine.
		if v < 0 {
			return Invalidf("spec.resources.extended[%q] is %d: set zero or more", k, v)
		}
	}
	if err := validateImage("spec.image", s.GetImage()); err != nil {
		return err
	}
	if err := validateFirstBoot("spec.first_boot", s.GetFirstBoot()); err != nil {
		return err
	}
	if h := s.GetHostname(); h != "" && !IsHostname(h) {
		return Invalidf("spec.hostname %q is not a hostname: use letters, digits, '-' and '.' (RFC 1123), at most 253 characters", h)
	}
	if _, err := HostSelector(s); err != nil {
		return Invalidf("%v: use operators In, NotIn (with values), Exists or DoesNotExist (without)", err)
	}
	vols := s.GetVolumes()
	for i, v := range vols {
		if err := ValidateVolume(v); err != nil {
			return err
		}
		if named(vols[:i], v.GetName()) {
			return Invalidf("volume %q appears twice: give each volume its own name", v.GetName())
		}
	}
	nics := s.GetNetworkInterfaces()
	for i, n := range nics {
		if err := ValidateNetworkInterface(n); err != nil {
			return err
		}
		if named(nics[:i], n.GetName()) {
			return Invalidf("network interface %q appears twice: give each network interface its own name", n.GetName())
		}
	}
	return nil
}

// ValidateReimage refuses with INVALID a reimage no runtime can carry out: no machine id,
// no image reference and digest, or a first-boot config whose format is not one the MRI
// defines (E2, E8). A runtime checks the image itself (its entry, its architecture) after.
func ValidateReimage(req *mriv1alpha1.ReimageMachineRequest) error {
	if req.GetId() == "" {
		return Invalidf("id is required")
	}
	if err := validateImage("image", req.GetImage()); err != nil {
		return err
	}
	return validateFirstBoot("first_boot", req.GetFirstBoot())
}

func validateImage(field string, img *mriv1alpha1.Image) error {
	if img.GetReference() == "" || !strings.HasPrefix(img.GetDigest(), "sha256:") {
		return Invalidf("%s needs a reference and its sha256 digest: resolve the reference first", field)
	}
	return nil
}

// validateFirstBoot: a machine without first-boot data may leave it out; one that sets it
// says how to read the data, and its metadata and hardware references hold to
// ValidateFirstBootMetaData.
func validateFirstBoot(field string, fb *mriv1alpha1.FirstBootConfig) error {
	if fb == nil {
		return nil
	}
	if err := checkEnum(field+".format", fb.GetFormat(), mriv1alpha1.ConfigFormat_name, "NONE, IGNITION or CLOUD_INIT"); err != nil {
		return err
	}
	if err := ValidateFirstBootMetaData(fb.GetMetaData(), fb.GetHardwareMetaData()); err != nil {
		return Invalidf("%s.meta_data: %v", field, err)
	}
	return nil
}

// Bounds of first-boot metadata (the Machine's spec.metaData, whose CRD says the same).
const (
	MaxMetaDataKeys     = 32
	MaxMetaDataKeyLen   = 63
	MaxMetaDataValueLen = 1024
)

// RuntimeMetaDataKeys are the metadata keys the runtimes write themselves, from the
// machine's identity and hostname: the caller may not set them, in any case of letters.
var RuntimeMetaDataKeys = []string{"instance-id", "uuid", "name", "hostname", "local-hostname"}

// ValidateMetaData refuses metadata a runtime cannot write without letting it change
// the machine's identity or the files' shape: too many keys, a key outside
// [A-Za-z0-9._-] (so no key needs quoting to stay one key), one of RuntimeMetaDataKeys,
// or a value longer than MaxMetaDataValueLen characters. Values may hold any text: the
// writers quote them.
func ValidateMetaData(md map[string]string) error {
	if len(md) > MaxMetaDataKeys {
		return fmt.Errorf("%d keys; at most %d", len(md), MaxMetaDataKeys)
	}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if !isMetaDataKey(k) {
			return fmt.Errorf("key %q: use letters, digits, '-', '_' and '.', starting and ending with a letter or digit, at most %d characters", k, MaxMetaDataKeyLen)
		}
		if slices.Contains(RuntimeMetaDataKeys, strings.ToLower(k)) {
			return fmt.Errorf("key %q is written by the runtime itself (%s): drop it", k, strings.Join(RuntimeMetaDataKeys, ", "))
		}
		if n := utf8.RuneCountInString(md[k]); n > MaxMetaDataValueLen {
			return fmt.Errorf("key %q: the value has %d characters; at most %d", k, n, MaxMetaDataValueLen)
		}
	}
	return nil
}

func isMetaDataKey(k string) bool {
	if k == "" || len(k) > MaxMetaDataKeyLen {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for i := 0; i < len(k); i++ {
		if c := k[i]; !alnum(c) && ((i == 0 || i == len(k)-1) || (c != '-' && c != '_' && c != '.')) {
			return false
		}
	}
	return true
}

// IsHostname reports whether h is a hostname a guest can take (RFC 1123, in any case). The
// runtimes write it into cloud-init's meta-data (YAML for a NoCloud seed, JSON on a config
// drive); a line break or a control character there breaks the file, or sets a name no
// resolver reads.
func IsHostname(h string) bool {
	return len(validation.IsDNS1123Subdomain(strings.ToLower(h))) == 0
}

// ValidateVolume refuses with INVALID a volume without a name or a source, or with a size
// no disk has: at create and when attached.
func ValidateVolume(v *mriv1alpha1.Volume) error {
	if v.GetName() == "" {
		return Invalidf("a volume needs a name")
	}
	switch src := v.GetSource().(type) {
	case *mriv1alpha1.Volume_ImageDisk:
		if src.ImageDisk.GetSizeBytes() < 0 {
			return Invalidf("volume %s: negative size: set image_disk.size_bytes to 0 to keep the image's size", v.GetName())
		}
	case *mriv1alpha1.Volume_EmptyDisk:
		if src.EmptyDisk.GetSizeBytes() <= 0 {
			return Invalidf("volume %s: an empty disk needs a size", v.GetName())
		}
	case *mriv1alpha1.Volume_Handle:
		if src.Handle == "" {
			return Invalidf("volume %s: the handle is empty: name the disk it stands for", v.GetName())
		}
	default:
		return Invalidf("volume %s needs a source: image_disk, empty_disk or handle", v.GetName())
	}
	return nil
}

// ValidateNetworkInterface refuses with INVALID a network interface without a name or a
// network, or with a MAC address that is not one: at create and when attached.
func ValidateNetworkInterface(n *mriv1alpha1.NetworkInterface) error {
	if n.GetName() == "" || n.GetNetwork() == "" {
		return Invalidf("a network interface needs a name and a network")
	}
	if mac := n.GetMacAddress(); mac != "" {
		if hw, err := net.ParseMAC(mac); err != nil || len(hw) != 6 {
			return Invalidf("network interface %s: MAC address %q is not xx:xx:xx:xx:xx:xx", n.GetName(), mac)
		}
	}
	return nil
}

// checkEnum refuses the zero value, so that a missing field never means a default (E2),
// and a value the MRI does not define, which a newer caller may send (E1).
func checkEnum[E ~int32](field string, v E, names map[int32]string, set string) error {
	if v == 0 {
		return Invalidf("%s is unspecified: set %s", field, set)
	}
	if _, ok := names[int32(v)]; !ok {
		return Invalidf("%s is %d, which MRI v1alpha1 does not define: set %s", field, int32(v), set)
	}
	return nil
}

// named reports whether one of list is called name.
func named[T interface{ GetName() string }](list []T, name string) bool {
	for _, x := range list {
		if x.GetName() == name {
			return true
		}
	}
	return false
}

// Invalidf is the INVALID error every runtime answers a request it can never carry out
// as asked: the one way to make it.
func Invalidf(format string, args ...any) error {
	return Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, format, args...)
}
