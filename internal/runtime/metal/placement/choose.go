package placement

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Request is what a machine asks of a Host.
type Request struct {
	Architecture          computev1alpha1.Architecture
	MilliCPU, MemoryBytes int64
	Extended              map[string]int64
	// Class names the machine's class in refusals.
	Class string
	// HostSelector is the Machine's spec.hostSelector (matchLabels and matchExpressions);
	// nil selects every Host.
	HostSelector labels.Selector
	// Namespace of the Machine, with its labels, for the HostPolicies.
	Namespace       string
	NamespaceLabels map[string]string
	// Ramdisk: the image is a kernel and initramfs booted from RAM, which only a BMC with
	// virtual media (Redfish) or fake hardware can boot.
	Ramdisk bool
	// HardwareMetaData are the first boot's hardware references (MRI rule F2): only a Host
	// whose HardwareData answers each one can take the machine.
	HardwareMetaData []*mriv1alpha1.HardwareMetaData
}

// Why a request has no Host, from the most to the least fundamental.
type Reason string

const (
	ReasonWrongArchitecture Reason = "WrongArchitecture"
	ReasonNoFit             Reason = "NoFit"
	ReasonNoVirtualMedia    Reason = "NoVirtualMedia"
	ReasonNoSelectorMatch   Reason = "NoSelectorMatch"
	ReasonNoHardwareMatch   Reason = "NoHardwareMatch"
	ReasonNotPermitted      Reason = "NotPermitted"
	ReasonAllInUse          Reason = "AllInUse"
)

// Refusal says why no Host can take a request. Message reaches the tenant (its Machine's
// conditions): it says what the tenant can change and never names the infrastructure
// namespace, a Host, or how many Hosts there are. Detail adds those, for the runtime's
// log and its operators.
type Refusal struct {
	Reason  Reason
	Message string
	Detail  string
}

func (r *Refusal) Error() string { return r.Message }

// Fits reports whether the request fits a Host of this size: enough cpu and memory, and
// no extended resource but one ResourceHosts.
func (req Request) Fits(size Size) bool {
	if req.MilliCPU > size.MilliCPU || req.MemoryBytes > size.MemoryBytes {
		return false
	}
	for name, v := range req.Extended {
		if v > 0 && (name != ResourceHosts || v > 1) {
			return false
		}
	}
	return true
}

// Matches reports whether the Host can take the request now; the runtime asks it again of
// a Host read fresh from the API server just before claiming it.
func (inv Inventory) Matches(req Request, h *metalv1alpha1.Host) bool {
	size, ok := inv.SizeOf(h)
	return ok && h.Spec.Architecture == req.Architecture && req.Fits(size) && (!req.Ramdisk || BootsFromRAM(h)) &&
		req.hostSelector().Matches(labels.Set(h.Labels)) && inv.hasHardware(req, h) &&
		Permitted(h, inv.Policies, req.Namespace, req.NamespaceLabels) && Free(h)
}

// Candidates returns the free Hosts that can take the request, sorted by name so that
// every runtime reading the same Hosts tries them in the same order; when there is none,
// it says why. The filters run from the most fundamental (architecture) to the most
// passing (in use), and the first that leaves nothing is the reason given.
func (inv Inventory) Candidates(req Request) ([]*metalv1alpha1.Host, *Refusal) {
	var ofArch []*metalv1alpha1.Host
	for _, h := range inv.Hosts {
		if h.Spec.Architecture == req.Architecture && inv.Counts(h) {
			ofArch = append(ofArch, h)
		}
	}
	if len(ofArch) == 0 {
		return nil, &Refusal{ReasonWrongArchitecture, fmt.Sprintf("the pool has no %s Host", req.Architecture), ""}
	}
	fitting := filter(ofArch, func(h *metalv1alpha1.Host) bool {
		size, ok := inv.SizeOf(h)
		return ok && req.Fits(size)
	})
	if len(fitting) == 0 {
		return nil, &Refusal{ReasonNoFit, fmt.Sprintf("no %s Host fits class %s (%s)", req.Architecture, req.Class, req.describe()),
			fmt.Sprintf("%d %s Hosts", len(ofArch), req.Architecture)}
	}
	if req.Ramdisk {
		if fitting = filter(fitting, BootsFromRAM); len(fitting) == 0 {
			return nil, &Refusal{ReasonNoVirtualMedia, fmt.Sprintf("no %s Host that fits class %s can boot a kernel and initramfs: "+
				"that needs a Redfish BMC with virtual media (redfish://), and these are ipmi://", req.Architecture, req.Class), ""}
		}
	}
	sel := req.hostSelector()
	selected := filter(fitting, func(h *metalv1alpha1.Host) bool { return sel.Matches(labels.Set(h.Labels)) })
	if len(selected) == 0 {
		return nil, &Refusal{ReasonNoSelectorMatch, fmt.Sprintf("no %s Host that fits class %s matches hostSelector %s: change or remove spec.hostSelector",
			req.Architecture, req.Class, formatSelector(req.hostSelector())),
			fmt.Sprintf("%d Hosts fit", len(fitting))}
	}
	if len(req.HardwareMetaData) > 0 {
		// Named after the first Host in name order: which NICs and disks it has is what the
		// tenant sees of its server anyway (its HardwareData copy), never which Host.
		slices.SortFunc(selected, func(a, b *metalv1alpha1.Host) int { return strings.Compare(a.Name, b.Name) })
		_, missing := inv.HardwareValues(req, selected[0])
		if selected = filter(selected, func(h *metalv1alpha1.Host) bool { return inv.hasHardware(req, h) }); len(selected) == 0 {
			return nil, &Refusal{ReasonNoHardwareMatch, fmt.Sprintf("no %s Host that fits class %s%s has the hardware spec.hardwareMetaData reads: %v: "+
				"name a NIC or disk the servers have, or drop the key", req.Architecture, req.Class, selectorSuffix(req.HostSelector), missing),
				fmt.Sprintf("%d Hosts fit and match", len(fitting))}
		}
	}
	permitted := filter(selected, func(h *metalv1alpha1.Host) bool {
		return Permitted(h, inv.Policies, req.Namespace, req.NamespaceLabels)
	})
	if len(permitted) == 0 {
		return nil, &Refusal{ReasonNotPermitted, fmt.Sprintf("no HostPolicy lets namespace %s use a Host that fits class %s%s: ask the pool's operators for one",
			req.Namespace, req.Class, selectorSuffix(req.HostSelector)),
			fmt.Sprintf("no HostPolicy in namespace %s lets namespace %s use the %d Hosts that fit", selected[0].Namespace, req.Namespace, len(selected))}
	}
	free := filter(permitted, Free)
	if len(free) == 0 {
		return nil, &Refusal{ReasonAllInUse, fmt.Sprintf("every Host that fits class %s%s and namespace %s may use is in use",
			req.Class, selectorSuffix(req.HostSelector), req.Namespace),
			fmt.Sprintf("all %d such Hosts are in use", len(permitted))}
	}
	slices.SortFunc(free, func(a, b *metalv1alpha1.Host) int { return strings.Compare(a.Name, b.Name) })
	return free, nil
}

// HardwareValues resolves the request's hardware references from the Host's HardwareData
// (mri.ResolveHardware): the values the machine's first boot carries on this Host, or
// which reference it cannot answer and what it has instead.
func (inv Inventory) HardwareValues(req Request, h *metalv1alpha1.Host) (map[string]string, error) {
	return mri.ResolveHardware(req.HardwareMetaData, HardwareNames(inv.Hardware[h.Name]))
}

func (inv Inventory) hasHardware(req Request, h *metalv1alpha1.Host) bool {
	if len(req.HardwareMetaData) == 0 {
		return true
	}
	_, err := inv.HardwareValues(req, h)
	return err == nil
}

// HardwareNames are a HardwareData's NICs with their MACs and disks with their serials;
// none for a Host not inspected yet.
func HardwareNames(hw *metalv1alpha1.HardwareDataSpec) mri.HardwareNames {
	names := mri.HardwareNames{NICs: map[string]string{}, Disks: map[string]string{}}
	if hw == nil {
		return names
	}
	for _, n := range hw.NICs {
		names.NICs[n.Name] = n.MACAddress
	}
	for _, d := range hw.Disks {
		names.Disks[d.Name] = d.SerialNumber
	}
	return names
}

// BootsFromRAM reports whether the Host's BMC can boot a kernel and initramfs: Redfish
// virtual media (the provisioner's ramdisk deploy) or fake hardware.
func BootsFromRAM(h *metalv1alpha1.Host) bool {
	a := h.Spec.BMC.Address
	return strings.HasPrefix(a, "redfish") || strings.HasPrefix(a, "fake:")
}

func filter(hosts []*metalv1alpha1.Host, keep func(*metalv1alpha1.Host) bool) []*metalv1alpha1.Host {
	var out []*metalv1alpha1.Host
	for _, h := range hosts {
		if keep(h) {
			out = append(out, h)
		}
	}
	return out
}

// describe says what the request needs, for refusals.
func (req Request) describe() string {
	s := fmt.Sprintf("needs %s cpu and %s memory",
		resource.NewMilliQuantity(req.MilliCPU, resource.DecimalSI), resource.NewQuantity(req.MemoryBytes, resource.BinarySI))
	for _, name := range slices.Sorted(maps.Keys(req.Extended)) {
		if v := req.Extended[name]; v > 0 && (name != ResourceHosts || v > 1) {
			s += fmt.Sprintf(", %d %s, which no Host offers", v, name)
		}
	}
	return s
}

// hostSelector is the request's selector, every Host when it has none.
func (req Request) hostSelector() labels.Selector {
	if req.HostSelector == nil {
		return labels.Everything()
	}
	return req.HostSelector
}

func formatSelector(sel labels.Selector) string {
	return "{" + sel.String() + "}"
}

func selectorSuffix(sel labels.Selector) string {
	if sel == nil || sel.Empty() {
		return ""
	}
	return " and hostSelector " + formatSelector(sel)
}
