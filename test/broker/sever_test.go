package broker

import (
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
)

// S1's kube-apiserver is stopped (SIGSTOP), not killed: its port stays open and nothing
// answers, as when the link to a site is cut, rather than a refused connection, which says
// the site is up but its API is not. R's Machines on S1 keep their last status and say the
// site is unreachable; nothing is deleted on either side; once S1 answers again (SIGCONT)
// they converge.
func (f *fleet) severedSiteKeepsMachines(t *testing.T) {
	names := []string{"kept-1", "kept-2"}
	for _, name := range names {
		f.r.apply(t, fmt.Sprintf(`
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: %s, namespace: tenant, labels: {batch: kept}}
spec:
  machineClassRef: {name: tiny}
  architecture: amd64
  image: %s
  machinePoolSelector: {anvil.test/site: s1}
`, name, f.s1.testOS()))
	}
	for _, name := range names {
		f.r.wait(t, 2*time.Minute, "Running True", "get", "machine", name, "-n", tenant, "-o",
			`jsonpath={.status.state} {.status.conditions[?(@.type=="`+mapping.ConditionSiteReachable+`")].status}`)
	}
	before := downstreamUIDs(f.s1.brokered(t, "s1"))

	pid := f.s1.apiserverPID(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	for _, name := range names {
		var m *computev1alpha1.Machine
		eventually(t, 2*time.Minute, name+" saying S1 is unreachable", func() (bool, string) {
			m = f.r.machine(t, name)
			c := condition(m, mapping.ConditionSiteReachable)
			return strings.HasPrefix(c, mapping.ConditionSiteReachable+"=False "+mapping.ReasonSiteUnreachable+": "), c
		})
		if m.Status.State != computev1alpha1.MachineStateRunning || m.DeletionTimestamp != nil {
			t.Errorf("%s while S1 is unreachable: state %s, deleted at %v; want its last state (Running), not deleted", name, m.Status.State, m.DeletionTimestamp)
		}
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	for _, name := range names {
		f.r.wait(t, 2*time.Minute, "Running True", "get", "machine", name, "-n", tenant, "-o",
			`jsonpath={.status.state} {.status.conditions[?(@.type=="`+mapping.ConditionSiteReachable+`")].status}`)
	}
	if after := downstreamUIDs(f.s1.brokered(t, "s1")); after != before {
		t.Errorf("S1's Machines changed across the outage: %s before, %s after", before, after)
	}
	f.r.kubectl(t, "", "delete", "machines", "-n", tenant, "-l", "batch=kept", "--timeout", "2m")
}

// downstreamUIDs are the Machines' UIDs (those of objects still there, not being deleted),
// sorted, as one string.
func downstreamUIDs(ms []computev1alpha1.Machine) string {
	var uids []string
	for _, m := range ms {
		if m.DeletionTimestamp == nil {
			uids = append(uids, string(m.UID))
		}
	}
	sort.Strings(uids)
	return strings.Join(uids, ",")
}
