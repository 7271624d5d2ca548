package qemu

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// hostResources returns the host's cpus and memory.
func hostResources() (milliCPU, memoryBytes int64, err error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kib, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("/proc/meminfo MemTotal %q: %w", fields[1], err)
			}
			return int64(runtime.NumCPU()) * 1000, kib * 1024, nil
		}
	}
	return 0, 0, fmt.Errorf("/proc/meminfo has no MemTotal")
}

// scaled multiplies the host's resources by the overcommit ratios. Memory is offered in
// whole GiB, the fraction left to the host, so a pool reads "23Gi" and not "24684092Ki"
// (a host's MemTotal is never a round number).
func scaled(milliCPU, memoryBytes int64, cpuRatio, memoryRatio float64) *mriv1alpha1.Resources {
	const gib = 1 << 30
	memory := int64(float64(memoryBytes) * memoryRatio)
	if memory >= gib {
		memory -= memory % gib
	}
	return &mriv1alpha1.Resources{MilliCpu: int64(float64(milliCPU) * cpuRatio), MemoryBytes: memory}
}

// fits reports why want does not fit beside used within alloc, or "" when it fits
// (CONTRACT.md E5). It compares want with what is left, never used+want with alloc: a
// huge want would overflow the sum and fit.
func fits(alloc, used, want *mriv1alpha1.Resources) string {
	if want.GetMilliCpu() > alloc.GetMilliCpu()-used.GetMilliCpu() {
		return fmt.Sprintf("cpu: %dm used, %dm asked, %dm allocatable", used.GetMilliCpu(), want.GetMilliCpu(), alloc.GetMilliCpu())
	}
	if want.GetMemoryBytes() > alloc.GetMemoryBytes()-used.GetMemoryBytes() {
		return fmt.Sprintf("memory: %d bytes used, %d asked, %d allocatable", used.GetMemoryBytes(), want.GetMemoryBytes(), alloc.GetMemoryBytes())
	}
	for k, v := range want.GetExtended() {
		if v > alloc.GetExtended()[k]-used.GetExtended()[k] {
			return fmt.Sprintf("%s: this pool has none to spare", k)
		}
	}
	return ""
}

// add accumulates r into sum.
func add(sum, r *mriv1alpha1.Resources) {
	sum.MilliCpu += r.GetMilliCpu()
	sum.MemoryBytes += r.GetMemoryBytes()
	for k, v := range r.GetExtended() {
		if sum.Extended == nil {
			sum.Extended = map[string]int64{}
		}
		sum.Extended[k] += v
	}
}
