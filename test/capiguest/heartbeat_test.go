package capiguest_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/capienv"
)

// A guest that stops heartbeating goes NotReady for real: its QEMU is frozen (SIGSTOP), the
// workload cluster's kube-controller-manager marks its Node Ready=Unknown once the grace
// period passes without a Lease renewal, and the Machine's NodeHealthy stops being True
// (Unknown: Cluster API's reading of an Unknown Ready). Thawed (SIGCONT), the agent renews
// its Lease and posts Ready again, and the Machine is healthy again, on the same QEMU.
func TestStoppedGuestGoesNotReady(t *testing.T) {
	r := theRig(t)
	c := theCluster(t, r)
	ctx := context.Background()
	md, tmpl := capienv.MachineDeployment(c.Cluster, "heartbeat", bootstrapSecret, "", r.machineSpec(computev1alpha1.ArchitectureAMD64), 1)
	if err := capienv.Create(ctx, env.Client, tmpl, md); err != nil {
		t.Fatal(err)
	}
	m := waitHealthy(t, md, 1)[0]
	g := assertGuestNode(t, r, &m, computev1alpha1.ArchitectureAMD64)
	p, ok := vmProcess(consoleDir(g.anvil))
	if !ok {
		t.Fatalf("no QEMU process for anvil Machine %s in %s", g.anvil.Name, consoleDir(g.anvil))
	}

	if err := syscall.Kill(p.PID, syscall.SIGSTOP); err != nil {
		t.Fatalf("stopping QEMU %d: %v", p.PID, err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := syscall.Kill(p.PID, syscall.SIGCONT); err != nil {
				t.Errorf("continuing QEMU %d: %v", p.PID, err)
			}
		}
	}
	t.Cleanup(thaw)
	stopped := time.Now()
	capienv.Eventually(t, gracePeriod+time.Minute, fmt.Sprintf("Node %s Ready=Unknown", g.node.Name), func() error {
		n := &corev1.Node{}
		if err := r.workloadClient.Get(ctx, client.ObjectKeyFromObject(g.node), n); err != nil {
			return err
		}
		if ready := nodeReady(n); ready != corev1.ConditionUnknown {
			return fmt.Errorf("Ready=%s", ready)
		}
		return nil
	})
	t.Logf("Node %s Ready=Unknown %s after its QEMU stopped", g.node.Name, time.Since(stopped).Round(100*time.Millisecond))
	// Cluster API reads a Node whose Ready is Unknown as NodeHealthy Unknown (not False),
	// with the node lifecycle controller's message; a MachineHealthCheck's unhealthy
	// conditions name Ready=Unknown for this.
	var cond *metav1.Condition
	capienv.Eventually(t, time.Minute, fmt.Sprintf("Machine %s NodeHealthy Unknown: the Node stopped posting its status", m.Name), func() error {
		cur := &clusterv1.Machine{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&m), cur); err != nil {
			return err
		}
		cond = apimeta.FindStatusCondition(cur.Status.Conditions, clusterv1.MachineNodeHealthyCondition)
		if cond == nil || cond.Status != metav1.ConditionUnknown || !strings.Contains(cond.Message, "stopped posting node status") {
			return fmt.Errorf("NodeHealthy %+v", cond)
		}
		return nil
	})
	t.Logf("Machine %s NodeHealthy %s (%s: %s) %s after its QEMU stopped", m.Name, cond.Status, cond.Reason, cond.Message, time.Since(stopped).Round(100*time.Millisecond))

	thaw()
	thawedAt := time.Now()
	capienv.Eventually(t, 2*time.Minute, fmt.Sprintf("Machine %s healthy again", m.Name), func() error {
		cur := &clusterv1.Machine{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&m), cur); err != nil {
			return err
		}
		return capienv.Healthy(cur)
	})
	t.Logf("Machine %s healthy again %s after its QEMU continued", m.Name, time.Since(thawedAt).Round(100*time.Millisecond))
	if q, ok := vmProcess(consoleDir(g.anvil)); !ok || q.PID != p.PID {
		t.Errorf("after the pause, anvil Machine %s runs QEMU %v, want the same process %d (not restarted)", g.anvil.Name, q, p.PID)
	}
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
