package scheduler

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// refuse does what a poollet does when its runtime turns a Machine down. The scheduler
// may write the Machine at the same moment (Scheduled=True after a rebind), so a conflict
// is retried, as a poollet would.
func refuse(t *testing.T, key client.ObjectKey) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := &computev1alpha1.Machine{}
		if err := env.Client.Get(context.Background(), key, m); err != nil {
			return err
		}
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
			Type: computev1alpha1.ConditionScheduled, Status: metav1.ConditionFalse,
			Reason: computev1alpha1.ReasonRuntimeRefused, Message: "no capacity", ObservedGeneration: m.Generation,
		})
		return env.Client.Status().Update(context.Background(), m)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRuntimeRefusalSendsMachineElsewhere(t *testing.T) {
	startScheduler(t, &Reconciler{RefusalBackoff: time.Hour})
	cls := uniq(t, "refuse")
	mustCreate(t, namespace("refuse", nil), class(cls, "1", "1Gi"))
	readyPool(t, cls+"-a", "amd64", "8", "8Gi", []string{cls}, nil)
	readyPool(t, cls+"-b", "amd64", "4", "4Gi", []string{cls}, nil) // spread prefers a
	m := machine("refuse", cls+"-m", cls, nil)
	mustCreate(t, m)
	key := client.ObjectKeyFromObject(m)
	eventually(t, key, "bound to a", boundTo(cls+"-a"))
	refuse(t, key)
	eventually(t, key, "rebound to b", boundTo(cls+"-b"))

	// Refused by b as well, with a excluded for an hour: nothing left, and it says so.
	refuse(t, key)
	eventually(t, key, "reported both refusals", scheduledFalse("2 pools: runtime refused this Machine recently"))
}

// A runtime refused a Machine for want of a fitting server (its Hosts were still being
// inspected); when the pool's capacity grows, the Machine is tried there again at once,
// not after the backoff (an hour here).
func TestRefusedMachineIsTriedAgainWhenThePoolChanges(t *testing.T) {
	startScheduler(t, &Reconciler{RefusalBackoff: time.Hour})
	cls := uniq(t, "grow")
	mustCreate(t, namespace("grow", nil), class(cls, "1", "1Gi"))
	readyPool(t, cls+"-a", "amd64", "2", "2Gi", []string{cls}, nil)
	m := machine("grow", cls+"-m", cls, nil)
	mustCreate(t, m)
	key := client.ObjectKeyFromObject(m)
	eventually(t, key, "bound to a", boundTo(cls+"-a"))
	refuse(t, key)
	eventually(t, key, "refused, nowhere else to go", scheduledFalse("runtime refused this Machine recently"))

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mp := &computev1alpha1.MachinePool{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: cls + "-a"}, mp); err != nil {
			return err
		}
		mp.Status.Allocatable["cpu"] = resource.MustParse("4")
		return env.Client.Status().Update(context.Background(), mp)
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, key, "bound to a again", boundTo(cls+"-a"))
}

func TestPinnedMachineStaysWhenRefused(t *testing.T) {
	startScheduler(t, &Reconciler{})
	cls := uniq(t, "pin")
	mustCreate(t, namespace("pin", nil), class(cls, "1", "1Gi"))
	readyPool(t, cls+"-a", "amd64", "8", "8Gi", []string{cls}, nil)
	m := machine("pin", cls+"-m", cls, func(m *computev1alpha1.Machine) {
		m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: cls + "-a"}
	})
	mustCreate(t, m)
	key := client.ObjectKeyFromObject(m)
	refuse(t, key)
	// Give the scheduler time to (wrongly) act, then check the pin held.
	time.Sleep(2 * time.Second)
	eventually(t, key, "still pinned", boundTo(cls+"-a"))
}

// A scheduler that restarts counts the Machines bound before it, once each.
func TestRestartCountsBoundMachinesOnce(t *testing.T) {
	cls := uniq(t, "restart")
	mustCreate(t, namespace("restart", nil), class(cls, "2", "2Gi"))
	readyPool(t, cls+"-p", "amd64", "4", "8Gi", []string{cls}, nil)

	first := &Reconciler{}
	ctxT := t
	t.Run("before restart", func(t *testing.T) {
		startScheduler(t, first)
		for _, n := range []string{"m0", "m1"} {
			m := machine("restart", cls+"-"+n, cls, nil)
			mustCreate(t, m)
			eventually(t, client.ObjectKeyFromObject(m), "bound", boundTo(cls+"-p"))
		}
	})
	startScheduler(ctxT, &Reconciler{})
	m := machine("restart", cls+"-m2", cls, nil)
	mustCreate(t, m)
	eventually(t, client.ObjectKeyFromObject(m), "refused for cpu", scheduledFalse("1 pool: insufficient cpu"))
}
