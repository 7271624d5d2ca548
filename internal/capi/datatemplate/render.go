package datatemplate

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Input is what a template is rendered with for one machine.
type Input struct {
	// ClusterName and MachineName fill {cluster} and {machine}.
	ClusterName, MachineName string
	// Index is the machine's index within the template (from Allocate); it fills {index}.
	Index int32
}

// Rendered is a machine's hostname and first-boot metadata.
type Rendered struct {
	// Hostname is the pattern filled in; empty when the template has none.
	Hostname string
	// MetaData holds the keys whose values the template gives.
	MetaData map[string]string
	// HardwareMetaData are the keys whose values come from the hardware the machine gets,
	// in the template's order: the anvil Machine carries them (spec.hardwareMetaData) and
	// the runtime that places it resolves them into its first boot.
	HardwareMetaData []computev1alpha1.HardwareMetaData
}

var placeholder = regexp.MustCompile(`\{[^{}]*\}`)

// Render fills the template for one machine. It refuses, naming the key and what to fix, a
// hostname that is not one once filled, an index past the end of an address list, a
// hardware field it does not know, and keys the anvil Machine would refuse.
func Render(t *infrav1.AnvilDataTemplateSpec, in Input) (Rendered, error) {
	out := Rendered{MetaData: map[string]string{}}
	if t.Hostname != "" {
		h, err := hostname(t.Hostname, in)
		if err != nil {
			return Rendered{}, err
		}
		out.Hostname = h
	}
	for _, e := range t.MetaData {
		if e.Key == infrav1.MetaDataProviderID {
			return Rendered{}, fmt.Errorf("metaData key %q is the provider's own (the machine's providerID): use another key", e.Key)
		}
		if e.Hardware != nil {
			f := e.Hardware.Field
			if f != computev1alpha1.HardwareNICMACAddress && f != computev1alpha1.HardwareDiskSerialNumber {
				return Rendered{}, fmt.Errorf("metaData key %q: unknown hardware field %q: use %s or %s", e.Key, f,
					computev1alpha1.HardwareNICMACAddress, computev1alpha1.HardwareDiskSerialNumber)
			}
			out.HardwareMetaData = append(out.HardwareMetaData, computev1alpha1.HardwareMetaData{Key: e.Key, Field: f, Name: e.Hardware.Name})
			continue
		}
		v, err := value(e, in)
		if err != nil {
			return Rendered{}, fmt.Errorf("metaData key %q: %w", e.Key, err)
		}
		out.MetaData[e.Key] = v
	}
	// The Machine's own rules (keys, the runtime's keys, sizes, the hardware keys' share of
	// the 32), with the provider's key counted in, so what Render returns is always a
	// Machine the API server accepts.
	check := map[string]string{infrav1.MetaDataProviderID: ""}
	maps.Copy(check, out.MetaData)
	if err := mri.ValidateFirstBootMetaData(check, mri.HardwareMetaDataToMRI(out.HardwareMetaData)); err != nil {
		return Rendered{}, fmt.Errorf("metaData: %w", err)
	}
	return out, nil
}

// hostname fills {cluster}, {machine} and {index}; any other {...} is refused, not left.
func hostname(pattern string, in Input) (string, error) {
	var bad []string
	h := placeholder.ReplaceAllStringFunc(pattern, func(p string) string {
		switch p {
		case "{cluster}":
			return in.ClusterName
		case "{machine}":
			return in.MachineName
		case "{index}":
			return strconv.Itoa(int(in.Index))
		}
		bad = append(bad, p)
		return p
	})
	if len(bad) > 0 {
		return "", fmt.Errorf("hostname pattern %q: unknown placeholder %s: use {cluster}, {machine} and {index}", pattern, strings.Join(bad, ", "))
	}
	if len(h) > 63 || !mri.IsHostname(h) || strings.ToLower(h) != h {
		return "", fmt.Errorf("hostname pattern %q gives %q for machine %s, which is not a hostname (lowercase RFC 1123, at most 63 characters): shorten the pattern or the names it uses", pattern, h, in.MachineName)
	}
	return h, nil
}

// value is one entry's value for the machine, from value, index or addresses.
func value(e infrav1.MetaDataEntry, in Input) (string, error) {
	switch {
	case e.Value != nil:
		return *e.Value, nil
	case e.Index != nil:
		return strconv.FormatInt(int64(e.Index.Offset)+int64(in.Index), 10), nil
	case len(e.Addresses) > 0:
		if int(in.Index) >= len(e.Addresses) || in.Index < 0 {
			return "", fmt.Errorf("machine %s has index %d but the address list has %d addresses (indexes 0 to %d): add addresses to the list", in.MachineName, in.Index, len(e.Addresses), len(e.Addresses)-1)
		}
		return e.Addresses[in.Index], nil
	}
	return "", fmt.Errorf("no source: set one of value, index, addresses or hardware")
}
