package placement

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// ResourceHosts is the extended resource a bare-metal pool reports: one per Host that
// counts. A MachineClass for bare metal asks for one, so the scheduler accounts Hosts.
const ResourceHosts = "anvil.dev/hosts"

// Inventory is a snapshot of one infrastructure namespace.
type Inventory struct {
	Hosts []*metalv1alpha1.Host
	// Hardware is the HardwareData of each Host, by Host name.
	Hardware map[string]*metalv1alpha1.HardwareDataSpec
	Policies []*metalv1alpha1.HostPolicy
}

// Size is what one Host offers a machine.
type Size struct {
	MilliCPU, MemoryBytes int64
}

// SizeOf is the Host's size from its status.hardware, or from its HardwareData when the
// summary is missing; false when neither says (not inspected yet).
func (inv Inventory) SizeOf(h *metalv1alpha1.Host) (Size, bool) {
	if hw := h.Status.Hardware; hw != nil && hw.CPUs > 0 && hw.MemoryMiB > 0 {
		return Size{MilliCPU: int64(hw.CPUs) * 1000, MemoryBytes: hw.MemoryMiB << 20}, true
	}
	if hw := inv.Hardware[h.Name]; hw != nil && hw.CPU.Count > 0 && hw.MemoryMiB > 0 {
		return Size{MilliCPU: int64(hw.CPU.Count) * 1000, MemoryBytes: hw.MemoryMiB << 20}, true
	}
	return Size{}, false
}

// Held reports whether a Machine holds the Host.
func Held(h *metalv1alpha1.Host) bool { return h.Spec.ConsumerRef != nil }

// Free reports whether the Host can be claimed now: Available, working, held by nobody,
// not detached and not being deleted.
func Free(h *metalv1alpha1.Host) bool {
	return h.DeletionTimestamp == nil && h.Spec.ConsumerRef == nil && !h.Spec.Detached &&
		h.Status.ProvisioningState == metalv1alpha1.StateAvailable &&
		h.Status.OperationalStatus == metalv1alpha1.OperationalOK
}

// Counts reports whether the Host is part of the pool's capacity: free and offered by a
// HostPolicy, or held by a Machine. A held Host counts whatever its state, because the
// scheduler counts its Machine against the pool: dropping the Host too would subtract it
// twice.
func (inv Inventory) Counts(h *metalv1alpha1.Host) bool {
	if h.DeletionTimestamp != nil {
		return false
	}
	if Held(h) {
		return true
	}
	return Free(h) && Offered(h, inv.Policies)
}

// Capacity is the pool's total.
type Capacity struct {
	MilliCPU, MemoryBytes, Hosts int64
	// Architectures of the Hosts that count, in computev1alpha1.KnownArchitectures order.
	Architectures []computev1alpha1.Architecture
}

// Capacity sums the Hosts that count and whose size is known. Machines never reduce it:
// the scheduler subtracts them (CONTRACT.md, StatusResponse.allocatable).
func (inv Inventory) Capacity() Capacity {
	var c Capacity
	archs := map[computev1alpha1.Architecture]bool{}
	for _, h := range inv.Hosts {
		size, ok := inv.SizeOf(h)
		if !ok || !inv.Counts(h) {
			continue
		}
		c.MilliCPU += size.MilliCPU
		c.MemoryBytes += size.MemoryBytes
		c.Hosts++
		archs[h.Spec.Architecture] = true
	}
	for _, a := range computev1alpha1.KnownArchitectures {
		if archs[a] {
			c.Architectures = append(c.Architectures, a)
		}
	}
	return c
}

// ClassFits reports whether a Machine of the class fits the Host: at least the class's
// cpu and memory, the class's architecture if it has one, and no extended resource but
// one ResourceHosts (a Host has nothing else to give).
func ClassFits(class *computev1alpha1.MachineClass, arch computev1alpha1.Architecture, size Size) bool {
	if class.Architecture != "" && class.Architecture != arch {
		return false
	}
	for name, q := range class.Capabilities {
		switch name {
		case corev1.ResourceCPU:
			if q.MilliValue() > size.MilliCPU {
				return false
			}
		case corev1.ResourceMemory:
			if q.Value() > size.MemoryBytes {
				return false
			}
		case ResourceHosts:
			if q.Value() > 1 {
				return false
			}
		default:
			if !q.IsZero() {
				return false
			}
		}
	}
	return true
}

// SupportedClasses names, sorted, the classes that fit at least one Host that counts.
func (inv Inventory) SupportedClasses(classes []*computev1alpha1.MachineClass) []string {
	var out []string
	for _, c := range classes {
		for _, h := range inv.Hosts {
			size, ok := inv.SizeOf(h)
			if ok && inv.Counts(h) && ClassFits(c, h.Spec.Architecture, size) {
				out = append(out, c.Name)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
