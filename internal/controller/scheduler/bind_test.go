package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func TestBindsUntilFullThenRetriesWhenAPoolAppears(t *testing.T) {
	startScheduler(t, &Reconciler{})
	cls := uniq(t, "fill")
	mustCreate(t, namespace("fill", nil), class(cls, "2", "2Gi"))
	poolA := cls + "-a"
	readyPool(t, poolA, "amd64", "4", "8Gi", []string{cls}, nil)

	var keys []client.ObjectKey
	for i := 0; i < 3; i++ {
		m := machine("fill", cls+"-m"+string(rune('0'+i)), cls, nil)
		mustCreate(t, m)
		keys = append(keys, client.ObjectKeyFromObject(m))
	}
	bound, pendingKey := 0, client.ObjectKey{}
	for _, k := range keys {
		m := eventually(t, k, "decided", func(m *computev1alpha1.Machine) bool {
			return m.Spec.MachinePoolRef != nil || scheduledFalse("")(m)
		})
		if m.Spec.MachinePoolRef != nil {
			bound++
		} else {
			pendingKey = k
		}
	}
	if bound != 2 {
		t.Fatalf("%d Machines of 2 cpu bound to a 4-cpu pool, want exactly 2", bound)
	}
	eventually(t, pendingKey, "said it is unschedulable for cpu", scheduledFalse("no MachinePool fits: 1 pool: insufficient cpu"))

	poolB := cls + "-b"
	readyPool(t, poolB, "amd64", "4", "8Gi", []string{cls}, nil)
	m := eventually(t, pendingKey, "bound to the new pool", boundTo(poolB))
	if c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != computev1alpha1.ReasonBound {
		eventually(t, pendingKey, "marked Scheduled=True", func(m *computev1alpha1.Machine) bool {
			return meta.IsStatusConditionTrue(m.Status.Conditions, computev1alpha1.ConditionScheduled)
		})
	}
}

func TestSummarisesEveryReasonAndRetriesOnSpecChange(t *testing.T) {
	startScheduler(t, &Reconciler{})
	cls := uniq(t, "why")
	mustCreate(t, namespace("why", nil), class(cls, "1", "1Gi"))
	readyPool(t, cls+"-tainted", "amd64", "8", "8Gi", []string{cls}, func(mp *computev1alpha1.MachinePool) {
		mp.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	})
	readyPool(t, cls+"-arm", "arm64", "8", "8Gi", []string{cls}, nil)
	readyPool(t, cls+"-other-tenant", "amd64", "8", "8Gi", []string{cls}, func(mp *computev1alpha1.MachinePool) {
		mp.Spec.Tenants = &computev1alpha1.TenantPolicy{Namespaces: []string{"someone-else"}}
	})
	m := machine("why", cls+"-m", cls, func(m *computev1alpha1.Machine) { m.Spec.Architecture = "amd64" })
	mustCreate(t, m)
	key := client.ObjectKeyFromObject(m)
	eventually(t, key, "explained", scheduledFalse(
		"1 pool: namespace not allowed by the pool's tenant policy; 1 pool: no matching architecture; 1 pool: untolerated taint dedicated=db:NoSchedule"))

	// Tolerating the taint is a spec change: the Machine is reconsidered and placed.
	if err := env.Client.Get(context.Background(), key, m); err != nil {
		t.Fatal(err)
	}
	m.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db"}}
	if err := env.Client.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	eventually(t, key, "bound to the tainted pool", boundTo(cls+"-tainted"))
}

func TestMissingClassIsReportedThenResolved(t *testing.T) {
	startScheduler(t, &Reconciler{})
	cls := uniq(t, "late")
	mustCreate(t, namespace("late", nil))
	readyPool(t, cls+"-p", "amd64", "8", "8Gi", []string{cls}, nil)
	m := machine("late", cls+"-m", cls, nil)
	mustCreate(t, m)
	key := client.ObjectKeyFromObject(m)
	eventually(t, key, "reported the missing class", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
		return c != nil && c.Reason == computev1alpha1.ReasonClassNotFound && m.Status.State == computev1alpha1.MachineStatePending
	})
	mustCreate(t, class(cls, "1", "1Gi"))
	eventually(t, key, "bound once the class exists", boundTo(cls+"-p"))
	eventually(t, key, "told in Events", func(*computev1alpha1.Machine) bool {
		return strings.Join(eventReasons(t, m), " ") == computev1alpha1.EventUnschedulable+" "+computev1alpha1.EventScheduled
	})
}

func TestImageArchitecturesChooseThePool(t *testing.T) {
	image := "registry.example/amd64-only:1"
	startScheduler(t, &Reconciler{Resolver: StaticImages{image: {"amd64"}}})
	cls := uniq(t, "img")
	mustCreate(t, namespace("img", nil), class(cls, "1", "1Gi"))
	// The arm64 pool sorts first and is emptier: only the image's index keeps the Machine off it.
	readyPool(t, cls+"-a-arm", "arm64", "64", "64Gi", []string{cls}, nil)
	readyPool(t, cls+"-b-amd", "amd64", "8", "8Gi", []string{cls}, nil)
	m := machine("img", cls+"-m", cls, func(m *computev1alpha1.Machine) { m.Spec.Image = image })
	mustCreate(t, m)
	eventually(t, client.ObjectKeyFromObject(m), "bound to the amd64 pool", boundTo(cls+"-b-amd"))

	only := machine("img", cls+"-only-arm", cls, func(m *computev1alpha1.Machine) {
		m.Spec.Image = image
		m.Spec.Architecture = "arm64"
	})
	mustCreate(t, only)
	eventually(t, client.ObjectKeyFromObject(only), "refused every pool for its architecture",
		scheduledFalse("no architecture satisfies the Machine (arm64), its MachineClass (any) and its image (amd64) together"))
}

// Pools coming up one by one (as anvil dev's do) change an unschedulable Machine's message,
// not its news: one Unschedulable Event, then Scheduled.
func TestPoolsComingUpGiveOneUnschedulableEvent(t *testing.T) {
	startScheduler(t, &Reconciler{})
	cls := uniq(t, "startup")
	mustCreate(t, namespace("startup", nil), class(cls, "1", "1Gi"))
	readyPool(t, cls+"-a", "amd64", "8", "8Gi", nil, nil)
	m := machine("startup", cls+"-m", cls, nil)
	mustCreate(t, m)
	key := client.ObjectKeyFromObject(m)
	// Other tests' pools share the control plane: the counts are theirs too, so the test
	// waits for the message to change, not for a number.
	var first string
	eventually(t, key, "unschedulable", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
		if c != nil {
			first = c.Message
		}
		return scheduledFalse("MachineClass not supported")(m)
	})
	readyPool(t, cls+"-b", "amd64", "8", "8Gi", nil, nil)
	eventually(t, key, "unschedulable, one pool more in the message", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
		return scheduledFalse("MachineClass not supported")(m) && c.Message != first
	})
	mp := &computev1alpha1.MachinePool{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: cls + "-a"}, mp); err != nil {
		t.Fatal(err)
	}
	mp.Status.SupportedClasses = []string{cls}
	if err := env.Client.Status().Update(context.Background(), mp); err != nil {
		t.Fatal(err)
	}
	eventually(t, key, "bound once the pool offers the class", boundTo(cls+"-a"))
	eventually(t, key, "told once of each", func(*computev1alpha1.Machine) bool {
		return strings.Join(eventReasons(t, m), " ") == computev1alpha1.EventUnschedulable+" "+computev1alpha1.EventScheduled
	})
}

// Machines created while their pool's poollet has not reported yet (anvil dev starting)
// wait for it: Scheduled False WaitingForPools, no Unschedulable Warning, and bound once
// the pool reports the class. (Before, each got an Unschedulable Warning.)
func TestMachinesWaitForAPoolThatHasNotReported(t *testing.T) {
	startScheduler(t, &Reconciler{})
	cls := uniq(t, "starting")
	mustCreate(t, namespace("starting", nil), class(cls, "1", "1Gi"))
	mp := &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: cls + "-pool"}}
	mustCreate(t, mp)
	m := machine("starting", cls+"-m", cls, nil)
	mustCreate(t, m)
	key := client.ObjectKeyFromObject(m)
	eventually(t, key, "waiting for the pool", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == computev1alpha1.ReasonWaitingForPools &&
			strings.Contains(c.Message, "waiting for MachinePools to report")
	})
	mp.Status = computev1alpha1.MachinePoolStatus{
		Architectures:    []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64},
		Allocatable:      corev1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("8Gi")},
		SupportedClasses: []string{cls},
		Conditions: []metav1.Condition{{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "RuntimeReady", LastTransitionTime: metav1.Now()}},
	}
	if err := env.Client.Status().Update(context.Background(), mp); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, namespace(computev1alpha1.PoolLeaseNamespace, nil), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: mp.Name, Namespace: computev1alpha1.PoolLeaseNamespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(mp.Name), LeaseDurationSeconds: ptr.To[int32](3600),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	})
	eventually(t, key, "bound once the pool reports", boundTo(mp.Name))
	eventually(t, key, "told only of the binding", func(*computev1alpha1.Machine) bool {
		return strings.Join(eventReasons(t, m), " ") == computev1alpha1.EventScheduled
	})
}
