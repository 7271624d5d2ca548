package mapping

import (
	"fmt"
	"sort"
	"strings"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// MatchClass checks that the downstream class c (nil when it does not exist) gives what
// the upstream spec's class gives: the same capabilities, and the machine's architecture
// if the class is limited to one. A mismatch is ErrInvalid naming the difference: the
// downstream would run (and count) a machine of another size than the upstream placed.
func MatchClass(c *computev1alpha1.MachineClass, s *mriv1alpha1.MachineSpec) error {
	if c == nil {
		return invalidf("class %s does not exist downstream: the broker runs a machine only in a class of the same name and size", s.GetClass())
	}
	want := mri.ResourcesToMRI(mri.ResourcesFromMRI(s.GetResources()))
	have := mri.ResourcesToMRI(c.Capabilities)
	var diff []string
	if want.GetMilliCpu() != have.GetMilliCpu() {
		diff = append(diff, fmt.Sprintf("cpu %dm upstream, %dm downstream", want.GetMilliCpu(), have.GetMilliCpu()))
	}
	if want.GetMemoryBytes() != have.GetMemoryBytes() {
		diff = append(diff, fmt.Sprintf("memory %d bytes upstream, %d downstream", want.GetMemoryBytes(), have.GetMemoryBytes()))
	}
	names := map[string]bool{}
	for k := range want.GetExtended() {
		names[k] = true
	}
	for k := range have.GetExtended() {
		names[k] = true
	}
	for k := range names {
		if want.GetExtended()[k] != have.GetExtended()[k] {
			diff = append(diff, fmt.Sprintf("%s %d upstream, %d downstream", k, want.GetExtended()[k], have.GetExtended()[k]))
		}
	}
	sort.Strings(diff)
	if arch := mri.ArchFromMRI(s.GetArchitecture()); c.Architecture != "" && c.Architecture != arch {
		diff = append(diff, fmt.Sprintf("the downstream class is limited to %s, the machine is %s", c.Architecture, arch))
	}
	if len(diff) > 0 {
		return invalidf("class %s differs downstream: %s", c.Name, strings.Join(diff, "; "))
	}
	return nil
}
