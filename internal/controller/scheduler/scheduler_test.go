package scheduler

import (
	"context"
	"fmt"
	"github.com/anvil-dev/anvil/internal/events"
	"sort"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/scheduler"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

// startScheduler runs the scheduler alone in a manager for the test's lifetime.
func startScheduler(t *testing.T, r *Reconciler) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		// Each test runs its own scheduler in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Client = mgr.GetClient()
	if r.Events == nil {
		// The package's tests write more Events in one process than a scheduler does in a
		// second, and check them: no drops.
		r.Events = events.New(mgr.GetEventRecorder("scheduler"), events.NewLimit(10000, 100000))
	}
	if r.Strategy == scheduler.StrategyUnspecified {
		r.Strategy = scheduler.StrategySpread
	}
	if err := r.SetupWithManager(mgr, 4); err != nil {
		t.Fatal(err)
	}
	harness.RunManager(t, mgr)
}

func mustCreate(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func class(name, cpu, mem string) *computev1alpha1.MachineClass {
	return &computev1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: name},
		Capabilities: corev1.ResourceList{"cpu": resource.MustParse(cpu), "memory": resource.MustParse(mem)},
	}
}

// readyPool creates a pool, reports it Ready with the given allocatable, and renews its Lease.
func readyPool(t *testing.T, name string, arch computev1alpha1.Architecture, cpu, mem string, classes []string, mutate func(*computev1alpha1.MachinePool)) {
	t.Helper()
	ctx := context.Background()
	mp := &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if mutate != nil {
		mutate(mp)
	}
	mustCreate(t, mp)
	mp.Status = computev1alpha1.MachinePoolStatus{
		Architectures:    []computev1alpha1.Architecture{arch},
		Allocatable:      corev1.ResourceList{"cpu": resource.MustParse(cpu), "memory": resource.MustParse(mem)},
		SupportedClasses: classes,
		Conditions: []metav1.Condition{{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "RuntimeReady", LastTransitionTime: metav1.Now()}},
	}
	if err := env.Client.Status().Update(ctx, mp); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, namespace(computev1alpha1.PoolLeaseNamespace, nil), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: computev1alpha1.PoolLeaseNamespace},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](3600),
			RenewTime: &metav1.MicroTime{Time: time.Now()},
		},
	})
}

func machine(ns, name, className string, mutate func(*computev1alpha1.Machine)) *computev1alpha1.Machine {
	m := &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: computev1alpha1.MachineSpec{
			MachineClassRef: computev1alpha1.MachineClassReference{Name: className},
			Image:           "registry.example/os:1",
		},
	}
	if mutate != nil {
		mutate(m)
	}
	return m
}

// eventually waits for cond on the Machine, failing with its last state.
func eventually(t *testing.T, key client.ObjectKey, what string, cond func(*computev1alpha1.Machine) bool) *computev1alpha1.Machine {
	t.Helper()
	m := &computev1alpha1.Machine{}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			if err := env.Client.Get(ctx, key, m); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return cond(m), nil
		})
	if err != nil {
		t.Fatalf("%s: Machine %s never %s; last seen spec %+v status %+v", t.Name(), key, what, m.Spec, m.Status)
	}
	return m
}

func boundTo(pool string) func(*computev1alpha1.Machine) bool {
	return func(m *computev1alpha1.Machine) bool {
		return m.Spec.MachinePoolRef != nil && m.Spec.MachinePoolRef.Name == pool
	}
}

func scheduledFalse(substr string) func(*computev1alpha1.Machine) bool {
	return func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, substr)
	}
}

func uniq(t *testing.T, prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
}

// eventReasons lists the reasons of the Events about m, by UID, oldest first.
func eventReasons(t *testing.T, m *computev1alpha1.Machine) []string {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(m.Namespace)); err != nil {
		t.Fatal(err)
	}
	sort.SliceStable(list.Items, func(i, j int) bool { return list.Items[i].EventTime.Before(&list.Items[j].EventTime) })
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.UID == m.UID {
			out = append(out, e.Reason)
		}
	}
	return out
}
