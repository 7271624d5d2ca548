package datatemplate

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Input is what a template is rendered with for one machine.
type Input struct {
	// ClusterName and MachineName fill {cluster} and {machine}.
	ClusterName, MachineName string
	// Index is the machine's index within the template (from Allocate); it fills {index}.
	Index int32
	// Hardware is the HardwareData of the server the machine got; nil while it is not known
	// (a server not provisioned yet) or for a VM, which has none.
	Hardware *metalv1alpha1.HardwareDataSpec
}

// Rendered is a machine's hostname and first-boot metadata.
type Rendered struct {
	// Hostname is the pattern filled in; empty when the template has none.
	Hostname string
	// MetaData holds every key whose value is known.
	MetaData map[string]string
	// Pending are the keys, sorted, whose value comes from HardwareData not known yet.
	Pending []string
}

var placeholder = regexp.MustCompile(`\{[^{}]*\}`)

// Render fills the template for one machine. It refuses, naming the key and what to fix, a
// hostname that is not one once filled, an index past the end of an address list, a
// HardwareData field it does not know, and a NIC or disk the server's HardwareData lacks.
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
		v, known, err := value(e, in)
		if err != nil {
			return Rendered{}, fmt.Errorf("metaData key %q: %w", e.Key, err)
		}
		if !known {
			out.Pending = append(out.Pending, e.Key)
			continue
		}
		out.MetaData[e.Key] = v
	}
	// The Machine's own rules (keys, the runtime's keys, sizes), with the provider's key
	// counted in, so what Render returns is always a Machine the API server accepts.
	check := map[string]string{infrav1.MetaDataProviderID: ""}
	for k, v := range out.MetaData {
		check[k] = v
	}
	if err := mri.ValidateMetaData(check); err != nil {
		return Rendered{}, fmt.Errorf("metaData: %w", err)
	}
	slices.Sort(out.Pending)
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

// value is one entry's value for the machine; known is false for HardwareData not known yet.
func value(e infrav1.MetaDataEntry, in Input) (string, bool, error) {
	switch {
	case e.Value != nil:
		return *e.Value, true, nil
	case e.Index != nil:
		return strconv.FormatInt(int64(e.Index.Offset)+int64(in.Index), 10), true, nil
	case len(e.Addresses) > 0:
		if int(in.Index) >= len(e.Addresses) || in.Index < 0 {
			return "", false, fmt.Errorf("machine %s has index %d but the address list has %d addresses (indexes 0 to %d): add addresses to the list", in.MachineName, in.Index, len(e.Addresses), len(e.Addresses)-1)
		}
		return e.Addresses[in.Index], true, nil
	case e.Hardware != nil:
		return hardware(*e.Hardware, in.Hardware)
	}
	return "", false, fmt.Errorf("no source: set one of value, index, addresses or hardware")
}

func hardware(src infrav1.HardwareSource, hw *metalv1alpha1.HardwareDataSpec) (string, bool, error) {
	var v, have string
	var found bool
	switch src.Field {
	case infrav1.HardwareNICMACAddress:
		if hw == nil {
			return "", false, nil
		}
		v, have, found = lookup(hw.NICs, src.Name, func(n metalv1alpha1.NIC) (string, string) { return n.Name, n.MACAddress })
		if !found {
			return "", false, fmt.Errorf("the server's HardwareData has no NIC %q with a MAC address (it has %s)", src.Name, have)
		}
	case infrav1.HardwareDiskSerialNumber:
		if hw == nil {
			return "", false, nil
		}
		v, have, found = lookup(hw.Disks, src.Name, func(d metalv1alpha1.Disk) (string, string) { return d.Name, d.SerialNumber })
		if !found {
			return "", false, fmt.Errorf("the server's HardwareData has no disk %q with a serial number (it has %s)", src.Name, have)
		}
	default:
		return "", false, fmt.Errorf("unknown HardwareData field %q: use %s or %s", src.Field, infrav1.HardwareNICMACAddress, infrav1.HardwareDiskSerialNumber)
	}
	return v, true, nil
}

// lookup is the non-empty value of the item called name; when there is none, the names
// there are, quoted, for the message ("none" for an empty list).
func lookup[T any](list []T, name string, field func(T) (name, value string)) (string, string, bool) {
	names := make([]string, 0, len(list))
	for _, x := range list {
		n, v := field(x)
		if n == name && v != "" {
			return v, "", true
		}
		names = append(names, strconv.Quote(n))
	}
	if len(names) == 0 {
		return "", "none", false
	}
	return "", strings.Join(names, ", "), false
}
