package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
)

// burst is how many Machines the kill subtest creates and deletes at once.
const burst = 100

// burstMachines are burst small Machines for S1's fake pool, each with first-boot data,
// so the broker makes a Secret downstream for each beside its Machine.
func burstMachines(image string) string {
	var b strings.Builder
	b.WriteString(`apiVersion: v1
kind: Secret
metadata: {name: burst-user-data, namespace: tenant}
stringData:
  userData: |
    #cloud-config
    # anvil-marker=burst
`)
	for i := range burst {
		fmt.Fprintf(&b, `---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: burst-%03d, namespace: tenant, labels: {batch: burst}}
spec:
  machineClassRef: {name: tiny}
  architecture: amd64
  image: %s
  machinePoolSelector: {anvil.test/site: s1}
  userDataRef: {name: burst-user-data}
`, i, image)
	}
	return b.String()
}

// The broker of S1 is SIGKILLed while the region makes 100 Machines, and started again:
// every region Machine ends with exactly one Machine in S1 (the restarted broker finds
// what the dead one made by name and label), all Running. Then it is SIGKILLed while the
// region deletes them: once it is back, nothing it made is left in S1.
func (f *fleet) brokerKilledDuringCreatesAndDeletes(t *testing.T) {
	batch := map[string]string{"batch": "burst"}
	f.r.apply(t, burstMachines(f.s1.testOS()))
	f.killBrokerOnceS1Holds(t, "creates", func(n int) bool { return n >= burst/10 })
	eventually(t, 5*time.Minute, fmt.Sprintf("%d Machines Running in R", burst), func() (bool, string) {
		running := 0
		for _, m := range f.r.machines(t, tenant, batch) {
			if m.Status.State == computev1alpha1.MachineStateRunning {
				running++
			}
		}
		return running == burst, fmt.Sprintf("%d Running", running)
	})
	perUpstream := map[string]int{}
	for _, d := range f.s1.brokered(t, "s1") {
		perUpstream[d.Labels[mapping.LabelUpstreamUID]]++
		if d.Status.State != computev1alpha1.MachineStateRunning {
			t.Errorf("S1's Machine %s is %s, want Running", d.Name, d.Status.State)
		}
	}
	ups := f.r.machines(t, tenant, batch)
	if len(ups) != burst {
		t.Fatalf("R has %d burst Machines, want %d", len(ups), burst)
	}
	for _, m := range ups {
		if n := perUpstream[string(m.UID)]; n != 1 {
			t.Errorf("%s has %d Machines in S1, want exactly 1", m.Name, n)
		}
		delete(perUpstream, string(m.UID))
	}
	if len(perUpstream) != 0 {
		t.Errorf("S1 holds Machines for no Machine of R: %v", perUpstream)
	}
	if n := len(f.s1.brokeredSecrets(t, "s1")); n != burst {
		t.Errorf("S1 holds %d first-boot Secrets of the broker, want one per Machine (%d)", n, burst)
	}

	f.r.kubectl(t, "", "delete", "machines", "-n", tenant, "-l", "batch=burst", "--wait=false")
	f.killBrokerOnceS1Holds(t, "deletes", func(n int) bool { return n <= burst-burst/10 })
	eventually(t, 5*time.Minute, "every burst Machine gone from R and S1", func() (bool, string) {
		up, down, secrets := len(f.r.machines(t, tenant, batch)), len(f.s1.brokered(t, "s1")), len(f.s1.brokeredSecrets(t, "s1"))
		return up == 0 && down == 0 && secrets == 0, fmt.Sprintf("%d in R, %d Machines and %d Secrets of the broker in S1", up, down, secrets)
	})
}

// killBrokerOnceS1Holds SIGKILLs S1's broker as soon as the number of Machines it made in
// S1 satisfies when, and starts it again.
func (f *fleet) killBrokerOnceS1Holds(t *testing.T, during string, when func(int) bool) {
	t.Helper()
	var n int
	eventually(t, 3*time.Minute, "the broker's Machines in S1 at the count to kill it at", func() (bool, string) {
		n = len(f.s1.brokered(t, "s1"))
		return when(n), fmt.Sprintf("%d Machines", n)
	})
	f.b1.kill(t)
	t.Logf("broker s1 SIGKILLed during the %s with %d of its Machines in S1", during, n)
	f.b1.start(t)
}
