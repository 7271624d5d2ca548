package capi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/remediation"
	"github.com/anvil-dev/anvil/test/capienv"
)

// A MachineHealthCheck with anvil's external remediation: a Machine whose Node goes
// NotReady is rebooted through its runtime, and, once healthy again, left in place; a Machine
// that stays NotReady is rebooted, power-cycled, given up on, and replaced by Cluster API.
func TestRemediationRebootsThenGivesUp(t *testing.T) {
	r := theRig(t)
	ctx := context.Background()
	ns := capienv.Namespace(t, env.Client, "remediation")
	nodes := startStandIns(t, r, ns)
	cluster := newCluster(t, r, ns, "rem")
	newControlPlaneMachine(t, r, cluster, "cp-0", computev1alpha1.ArchitectureAMD64)
	tmpl := &infrav1.AnvilRemediationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "reboot-then-cycle", Namespace: ns},
		Spec: infrav1.AnvilRemediationTemplateSpec{Template: infrav1.AnvilRemediationTemplateResource{Spec: infrav1.AnvilRemediationSpec{
			Strategies: []infrav1.RemediationStrategy{
				{Type: infrav1.RemediationReboot, Retries: 1, Timeout: metav1.Duration{Duration: 10 * time.Second}},
				{Type: infrav1.RemediationPowerCycle, Retries: 1, Timeout: metav1.Duration{Duration: 10 * time.Second}},
			}}}}}
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	md := newMachineDeployment(t, cluster, "workers", machineSpec(r, computev1alpha1.ArchitectureAMD64), "zone-a", 1)
	mhc := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns},
		Spec: clusterv1.MachineHealthCheckSpec{ClusterName: cluster.Name, Selector: md.Spec.Selector,
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: new(int32(1))}}},
			Remediation: clusterv1.MachineHealthCheckRemediation{TemplateRef: clusterv1.MachineHealthCheckRemediationTemplateReference{
				APIVersion: infrav1.GroupVersion.String(), Kind: "AnvilRemediationTemplate", Name: tmpl.Name}}}}
	if err := env.Client.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	machine := waitReplicas(t, md, 1, computev1alpha1.ArchitectureAMD64, "zone-a")[0]
	anvilKey := client.ObjectKey{Namespace: ns, Name: machine.Spec.InfrastructureRef.Name}

	// 1. NotReady, then back after the reboot: the same Machine stays.
	nodes.Unhealthy(machine.Spec.ProviderID, true)
	var rem infrav1.AnvilRemediation
	capienv.Eventually(t, time.Minute, "the MachineHealthCheck's request and anvil's reboot", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&machine), &rem); err != nil {
			return ignoreNotFound(err)
		}
		m := &computev1alpha1.Machine{}
		if err := env.Client.Get(ctx, anvilKey, m); err != nil {
			return err
		}
		if want := remediation.Token(&rem, 1); m.Annotations[computev1alpha1.AnnotationReboot] != want {
			return fmt.Errorf("reboot annotation %q, want %q", m.Annotations[computev1alpha1.AnnotationReboot], want)
		}
		return nil
	})
	nodes.Unhealthy(machine.Spec.ProviderID, false)
	capienv.Eventually(t, time.Minute, "the request to be deleted once the Node is healthy", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&rem), &infrav1.AnvilRemediation{}); ignoreNotFound(err) != errNotYet {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	if got := waitReplicas(t, md, 1, computev1alpha1.ArchitectureAMD64, "zone-a")[0]; got.UID != machine.UID {
		t.Fatalf("the rebooted Machine was replaced: %s → %s", machine.Name, got.Name)
	}

	// 2. NotReady for good: reboot, power cycle, give up; Cluster API replaces the Machine.
	nodes.Unhealthy(machine.Spec.ProviderID, true)
	capienv.Eventually(t, 2*time.Minute, "the remediation to give up", func() error {
		cur := &infrav1.AnvilRemediation{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&machine), cur); err != nil {
			return ignoreNotFound(err)
		}
		if cur.Status.Phase != infrav1.RemediationPhaseFailed {
			return fmt.Errorf("phase %q after %d tries", cur.Status.Phase, cur.Status.Tries)
		}
		if cur.Status.Tries != 2 {
			return fmt.Errorf("gave up after %d tries, want 2", cur.Status.Tries)
		}
		return nil
	})
	for _, reason := range []string{"Rebooting", "PowerOff", "PowerOn", "GaveUp"} {
		if n := capienv.Events(t, env.Client, ns, "AnvilRemediation", machine.Name, reason); n == 0 {
			t.Errorf("no %s Event on the remediation", reason)
		}
	}
	// The power cycle really turned the machine off: its pool said so.
	if n := capienv.Events(t, env.Client, ns, "Machine", anvilKey.Name, computev1alpha1.EventPoweredOff); n == 0 {
		t.Errorf("the anvil Machine was never powered off")
	}
	capienv.Eventually(t, 2*time.Minute, "Cluster API to replace the Machine given up on", func() error {
		machines, err := capienv.MachinesOf(ctx, env.Client, md)
		if err != nil {
			return err
		}
		for _, m := range machines {
			if m.UID == machine.UID {
				c := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition)
				return fmt.Errorf("the old Machine is still there (OwnerRemediated %+v)", c)
			}
		}
		return nil
	})
	waitReplicas(t, md, 1, computev1alpha1.ArchitectureAMD64, "zone-a")
}
