package capiguest_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/remediation"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/nodeagent"
)

// Timeouts of the remediation's strategies, sized for a TCG guest on a shared 2-core machine.
const (
	// rebootTimeout runs from the reboot request: a frozen QEMU answers no QMP, so the runtime
	// stops it only once it stayed unreachable (about 45 s), starts it again, and the guest
	// boots and registers its Node (10 s alone, up to a minute beside other guests).
	rebootTimeout = 2 * time.Minute
	// powerCycleTimeout runs from the power-on: a boot and a registration.
	powerCycleTimeout = 75 * time.Second
	// doomedRebootTimeout is the reboot's timeout in step 3, where no reboot can succeed (the
	// token is gone): long enough for the runtime to end the frozen QEMU (about 45 s after
	// the request) and start it again, so the reboot is really tried before the power cycle;
	// the full rebootTimeout there only waited.
	doomedRebootTimeout = time.Minute
)

// A MachineHealthCheck with anvil's remediation on a real guest.
//
//  1. Heartbeat: a frozen guest (its QEMU SIGSTOPped) stops renewing its Lease; the workload
//     cluster's kube-controller-manager marks its Node Ready=Unknown once the grace period
//     passes and Cluster API reads that as NodeHealthy Unknown. Thawed (SIGCONT), the same
//     QEMU renews its Lease and the Machine is healthy again. No health check exists yet.
//  2. Remediation: with the health check, the guest frozen again is marked unhealthy; anvil's
//     remediation reboots the anvil Machine through its runtime, which, since the frozen
//     QEMU answers no QMP, stops that process for good and starts the machine again on its
//     disks; the guest boots, its agent registers its Node again, and the SAME Cluster API
//     Machine and anvil Machine are healthy again (no replacement).
//  3. For good: the Machine's bootstrap token is deleted, so a guest booted again cannot
//     register; frozen a third time, the guest is rebooted, power-cycled, given up on
//     (OwnerRemediated=False), and Cluster API deletes the Machine (its anvil Machine, QEMU
//     and Node go away) and makes a replacement, which joins with its own Node.
func TestRemediationOfAFrozenGuest(t *testing.T) {
	r := theRig(t)
	c := theCluster(t, r)
	ctx := context.Background()
	ns := c.Namespace
	start := time.Now()

	// The MachineDeployment's own bootstrap data and token: step 3 deletes this token, which
	// the other tests' Machines (the shared node-agent Secret) must keep.
	token := r.bootstrapToken(t)
	tokenID, _, _ := strings.Cut(token, ".")
	secret := capienv.BootstrapSecret(c.Cluster, "remediation", r.agentScript(token))
	md, tmpl := capienv.MachineDeployment(c.Cluster, "remediation", secret.Name, "", r.machineSpec(computev1alpha1.ArchitectureAMD64), 1)
	if err := capienv.Create(ctx, env.Client, secret, tmpl, md); err != nil {
		t.Fatal(err)
	}
	m := waitHealthy(t, md, 1)[0]
	g := assertGuestNode(t, r, &m, computev1alpha1.ArchitectureAMD64)
	dir := g.dir

	// 1. Heartbeat: frozen, then thawed, with no health check.
	phase := time.Now()
	p := qemuOf(t, g)
	thaw := freeze(t, p)
	waitNodeUnknown(t, r, g.node, phase)
	var cond *metav1.Condition
	capienv.Eventually(t, time.Minute, fmt.Sprintf("Machine %s NodeHealthy Unknown: the Node stopped posting its status", m.Name), func() error {
		cur, err := capiMachine(ctx, &m)
		if err != nil {
			return err
		}
		// Cluster API reads a Node whose Ready is Unknown as NodeHealthy Unknown (not
		// False), with the node lifecycle controller's message: a MachineHealthCheck names
		// Ready=Unknown for this.
		cond = apimeta.FindStatusCondition(cur.Status.Conditions, clusterv1.MachineNodeHealthyCondition)
		if cond == nil || cond.Status != metav1.ConditionUnknown || !strings.Contains(cond.Message, "stopped posting node status") {
			return fmt.Errorf("NodeHealthy %+v", cond)
		}
		return nil
	})
	t.Logf("heartbeat: Machine %s NodeHealthy %s (%s: %s) %s after its QEMU stopped", m.Name, cond.Status, cond.Reason, cond.Message, since(phase))
	thaw()
	thawedAt := time.Now()
	waitMachineHealthy(t, &m, 2*time.Minute)
	t.Logf("heartbeat: Machine %s healthy again %s after its QEMU continued", m.Name, since(thawedAt))
	if q, ok := vmProcess(dir); !ok || q.PID != p {
		t.Fatalf("after the pause, anvil Machine %s runs QEMU %v, want the same process %d (not restarted)", g.anvil.Name, q, p)
	}

	// The health check: Ready Unknown (a guest that stopped posting) or False, for a second.
	remTmpl := &infrav1.AnvilRemediationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "reboot-then-cycle", Namespace: ns},
		Spec: infrav1.AnvilRemediationTemplateSpec{Template: infrav1.AnvilRemediationTemplateResource{Spec: infrav1.AnvilRemediationSpec{
			Strategies: []infrav1.RemediationStrategy{
				{Type: infrav1.RemediationReboot, Retries: 1, Timeout: metav1.Duration{Duration: rebootTimeout}},
				{Type: infrav1.RemediationPowerCycle, Retries: 1, Timeout: metav1.Duration{Duration: powerCycleTimeout}},
			}}}}}
	mhc := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "remediation", Namespace: ns},
		Spec: clusterv1.MachineHealthCheckSpec{ClusterName: c.Name, Selector: md.Spec.Selector,
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: new(int32(1))},
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: new(int32(1))}}},
			Remediation: clusterv1.MachineHealthCheckRemediation{TemplateRef: clusterv1.MachineHealthCheckRemediationTemplateReference{
				APIVersion: infrav1.GroupVersion.String(), Kind: "AnvilRemediationTemplate", Name: remTmpl.Name}}}}
	if err := capienv.Create(ctx, env.Client, remTmpl, mhc); err != nil {
		t.Fatal(err)
	}

	// 2. Frozen again: rebooted through the runtime, back on the same Machines.
	phase = time.Now()
	p = qemuOf(t, g)
	freeze(t, p)
	rem := waitRemediation(t, &m, "")
	t.Logf("remediation: Machine %s unhealthy and AnvilRemediation %s made %s after its QEMU stopped", m.Name, rem.UID, since(phase))
	anvilKey := client.ObjectKeyFromObject(g.anvil)
	capienv.Eventually(t, time.Minute, "anvil's reboot of the anvil Machine", func() error {
		a := &computev1alpha1.Machine{}
		if err := env.Client.Get(ctx, anvilKey, a); err != nil {
			return err
		}
		if want := remediation.Token(rem, 1); a.Annotations[computev1alpha1.AnnotationReboot] != want {
			return fmt.Errorf("reboot annotation %q, want %q", a.Annotations[computev1alpha1.AnnotationReboot], want)
		}
		return nil
	})
	t.Logf("remediation: reboot asked %s after the QEMU stopped", since(phase))
	// The frozen QEMU answers no QMP: the runtime must end it (not leave a stopped process
	// behind) and start the machine again.
	waitProcessGone(t, p, 2*time.Minute)
	t.Logf("remediation: frozen QEMU %d gone %s after the QEMU stopped", p, since(phase))
	var reboots int
	capienv.Eventually(t, rebootTimeout, fmt.Sprintf("Machine %s healthy again, its remediation deleted", m.Name), func() error {
		cur, err := capiMachine(ctx, &m)
		if err != nil {
			return err
		}
		if err := capienv.Healthy(cur); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(cur.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("HealthCheckSucceeded %+v", c)
		}
		if reboots = capienv.Events(t, env.Client, ns, "AnvilRemediation", m.Name, "Rebooting"); reboots == 0 {
			return errors.New("no Rebooting Event on the remediation")
		}
		return absent(ctx, client.ObjectKeyFromObject(rem), &infrav1.AnvilRemediation{})
	})
	t.Logf("remediation: Machine %s healthy again, its remediation deleted, %s after the QEMU stopped", m.Name, since(phase))
	if n := capienv.Events(t, env.Client, ns, "AnvilRemediation", m.Name, "PowerOff"); n != 0 {
		t.Errorf("the reboot did not bring the machine back: it was power-cycled (%d PowerOff Events)", n)
	}
	same := assertSameMachines(t, r, &m, g)
	if q, ok := vmProcess(dir); !ok || q.PID == p {
		t.Fatalf("anvil Machine %s runs QEMU %v after the reboot; want a new process, not %d", g.anvil.Name, q, p)
	}
	// The guest booted again and its agent registered the same Node with a new certificate.
	awaitConsoleLines(t, same, nodeagent.RegisteredLine(g.node.Name, g.node.Spec.ProviderID), 2)

	// 3. For good: the token gone, frozen a third time. Cluster API copies the template
	// into each remediation it makes: the next one gets the shorter reboot timeout.
	base := remTmpl.DeepCopy()
	remTmpl.Spec.Template.Spec.Strategies[0].Timeout = metav1.Duration{Duration: doomedRebootTimeout}
	if err := env.Client.Patch(ctx, remTmpl, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	phase = time.Now()
	tokens := r.workloadAdmin.CoreV1().Secrets(metav1.NamespaceSystem)
	tokenSecret, err := tokens.Get(ctx, bootstraputil.BootstrapTokenSecretName(tokenID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tokens.Delete(ctx, tokenSecret.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p = qemuOf(t, g)
	freeze(t, p)
	rem2 := waitRemediation(t, &m, rem.UID)
	t.Logf("give up: AnvilRemediation %s made %s after the QEMU stopped", rem2.UID, since(phase))
	waitProcessGone(t, p, 2*time.Minute)
	t.Logf("give up: frozen QEMU %d gone %s after the QEMU stopped", p, since(phase))
	// Powered on again by the power cycle, the guest's agent is refused the deleted token.
	var consoleAt int
	capienv.Eventually(t, doomedRebootTimeout+2*time.Minute, "the power cycle to power the machine on again", func() error {
		cur := &infrav1.AnvilRemediation{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rem2), cur); err != nil {
			return err
		}
		if cur.UID != rem2.UID || cur.Status.Strategy != 1 || cur.Status.Phase != infrav1.RemediationPhaseRunning {
			return fmt.Errorf("strategy %d, try %d, phase %q", cur.Status.Strategy, cur.Status.Try, cur.Status.Phase)
		}
		consoleAt = len(readConsole(t, g))
		return nil
	})
	t.Logf("give up: powered on again by the power cycle %s after the QEMU stopped", since(phase))
	capienv.Eventually(t, powerCycleTimeout, "the power-cycled guest's agent to be refused the deleted token", func() error {
		if !strings.Contains(readConsole(t, g)[consoleAt:], nodeagent.ErrTokenRefused.Error()) {
			return errors.New("not yet on the console")
		}
		return nil
	})
	t.Logf("give up: the power-cycled guest's agent refused the token %s after the QEMU stopped", since(phase))
	// The old guest's agent has stopped for good, refused on the machine's last boot (no
	// strategy is left to boot it again). The replacement boots the same bootstrap data, so
	// the same token is made valid again now: before the replacement exists rather than
	// racing its boot, and too late to save the old Machine.
	tokenSecret.ResourceVersion, tokenSecret.UID = "", ""
	if _, err := tokens.Create(ctx, tokenSecret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	capienv.Eventually(t, powerCycleTimeout+time.Minute, fmt.Sprintf("Machine %s given up on: OwnerRemediated False", m.Name), func() error {
		cur, err := capiMachine(ctx, &m)
		if err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(cur.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition)
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("OwnerRemediated %+v", c)
		}
		return nil
	})
	t.Logf("give up: Machine %s OwnerRemediated False %s after the QEMU stopped", m.Name, since(phase))
	for _, reason := range []string{"Rebooting", "PowerOff", "PowerOn", "GaveUp"} {
		if n := capienv.Events(t, env.Client, ns, "AnvilRemediation", m.Name, reason); n == 0 || reason == "Rebooting" && n <= reboots {
			t.Errorf("%d %s Events on the remediations of %s (%d before step 3)", n, reason, m.Name, reboots)
		}
	}
	if n := capienv.Events(t, env.Client, g.anvil.Namespace, "Machine", g.anvil.Name, computev1alpha1.EventPoweredOff); n == 0 {
		t.Errorf("anvil Machine %s was never reported powered off", g.anvil.Name)
	}
	awaitGone(t, r, same)
	t.Logf("give up: Machine %s's anvil Machine, QEMU and Node gone %s after the QEMU stopped", m.Name, since(phase))
	replaced := waitHealthy(t, md, 1)[0]
	if replaced.UID == m.UID {
		t.Fatalf("Machine %s was not replaced", m.Name)
	}
	ng := assertGuestNode(t, r, &replaced, computev1alpha1.ArchitectureAMD64)
	if ng.node.Name == g.node.Name || ng.anvil.UID == g.anvil.UID {
		t.Errorf("replacement %s has Node %s and anvil Machine %s; the old one had %s and %s", replaced.Name, ng.node.Name, ng.anvil.UID, g.node.Name, g.anvil.UID)
	}
	t.Logf("give up: replacement %s healthy with Node %s %s after the QEMU stopped; the whole test took %s", replaced.Name, ng.node.Name, since(phase), since(start))
}

// qemuOf is the pid of the QEMU that runs a guest now.
func qemuOf(t testing.TB, g guestVM) int {
	t.Helper()
	p, ok := vmProcess(g.dir)
	if !ok {
		t.Fatalf("no QEMU process for anvil Machine %s in %s", g.anvil.Name, g.dir)
	}
	return p.PID
}

// freeze stops a QEMU (SIGSTOP): its guest neither runs nor answers QMP. The returned thaw
// continues it, as the test's cleanup does if it still runs.
func freeze(t testing.TB, pid int) (thaw func()) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stopping QEMU %d: %v", pid, err)
	}
	thawed := false
	thaw = func() {
		if !thawed {
			thawed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Errorf("continuing QEMU %d: %v", pid, err)
			}
		}
	}
	t.Cleanup(thaw)
	return thaw
}

// waitNodeUnknown waits until a frozen guest's Node is Ready=Unknown.
func waitNodeUnknown(t testing.TB, r *rig, node *corev1.Node, frozenAt time.Time) {
	t.Helper()
	capienv.Eventually(t, gracePeriod+time.Minute, fmt.Sprintf("Node %s Ready=Unknown", node.Name), func() error {
		n := &corev1.Node{}
		if err := r.workloadClient.Get(context.Background(), client.ObjectKeyFromObject(node), n); err != nil {
			return err
		}
		if ready := nodeReady(n); ready != corev1.ConditionUnknown {
			return fmt.Errorf("Ready=%s", ready)
		}
		return nil
	})
	t.Logf("Node %s Ready=Unknown %s after its QEMU stopped", node.Name, since(frozenAt))
}

// waitRemediation waits until the health check marks m unhealthy and asks for its
// remediation (named after it), other than the one of UID old, and returns that request.
func waitRemediation(t testing.TB, m *clusterv1.Machine, old types.UID) *infrav1.AnvilRemediation {
	t.Helper()
	ctx := context.Background()
	rem := &infrav1.AnvilRemediation{}
	capienv.Eventually(t, gracePeriod+2*time.Minute, fmt.Sprintf("Machine %s unhealthy, its AnvilRemediation made", m.Name), func() error {
		cur, err := capiMachine(ctx, m)
		if err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(cur.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("HealthCheckSucceeded %+v", c)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), rem); err != nil {
			return err
		}
		if rem.UID == old {
			return fmt.Errorf("the AnvilRemediation is still the earlier one (%s)", old)
		}
		return nil
	})
	return rem
}

// assertSameMachines checks that m (the same object, by UID) is healthy on the same anvil
// Machine with the same Node, registered again by its guest, and returns what it sees.
func assertSameMachines(t testing.TB, r *rig, m *clusterv1.Machine, g guestVM) guestVM {
	t.Helper()
	cur, err := capiMachine(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if cur.UID != m.UID {
		t.Fatalf("Machine %s was replaced (UID %s, was %s)", m.Name, cur.UID, m.UID)
	}
	now := assertGuestNode(t, r, cur, computev1alpha1.ArchitectureAMD64)
	if now.anvil.UID != g.anvil.UID || now.node.UID != g.node.UID {
		t.Fatalf("Machine %s: anvil Machine %s, Node %s; want the same as before (%s, %s)", m.Name, now.anvil.UID, now.node.UID, g.anvil.UID, g.node.UID)
	}
	return now
}

// capiMachine reads m again; an error if it is gone.
func capiMachine(ctx context.Context, m *clusterv1.Machine) (*clusterv1.Machine, error) {
	cur := &clusterv1.Machine{}
	return cur, env.Client.Get(ctx, client.ObjectKeyFromObject(m), cur)
}

// waitMachineHealthy waits until m is healthy.
func waitMachineHealthy(t testing.TB, m *clusterv1.Machine, timeout time.Duration) {
	t.Helper()
	capienv.Eventually(t, timeout, fmt.Sprintf("Machine %s healthy", m.Name), func() error {
		cur, err := capiMachine(context.Background(), m)
		if err != nil {
			return err
		}
		return capienv.Healthy(cur)
	})
}

// absent says whether the object at key is gone (nil) or still there.
func absent(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	err := env.Client.Get(ctx, key, obj)
	if err == nil {
		return fmt.Errorf("%T %s still there", obj, key)
	}
	return client.IgnoreNotFound(err)
}

// waitProcessGone waits until pid has no /proc entry: the process ended and was reaped
// (neither stopped, nor a zombie).
func waitProcessGone(t testing.TB, pid int, timeout time.Duration) {
	t.Helper()
	capienv.Eventually(t, timeout, fmt.Sprintf("QEMU %d gone", pid), func() error {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("still there: %q (%v)", stat, err)
	})
}

// readConsole is an anvil Machine's console so far (every boot's, appended).
func readConsole(t testing.TB, g guestVM) string {
	t.Helper()
	raw, err := os.ReadFile(g.consoleLog())
	if err != nil {
		t.Fatalf("the console of %s: %v", g.anvil.Name, err)
	}
	return string(raw)
}

// nodeReady is the status of a Node's Ready condition, "" without one.
func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }
