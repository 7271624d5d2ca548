package security

import (
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/controller/secretaccess"
)

// poolletToken is a client with a real bearer token of pool's poollet ServiceAccount (a
// TokenRequest, as a pool host would be given), and nothing of the admin's credentials.
func poolletToken(t *testing.T, pool string) client.Client {
	t.Helper()
	ctx := context.Background()
	if _, err := rbac.InstallPoollet(ctx, env.Client, pool); err != nil {
		t.Fatal(err)
	}
	return serviceAccountToken(t, secretaccess.PoolletNamespace, secretaccess.ServiceAccountName(pool))
}

// The attack: the credentials of pool p1's poollet (a host of p1, compromised) write to
// another pool's status and Lease, to Machines bound to another pool, to Machines' specs,
// bindings and lifetimes: each would let it take over scheduling (mark pools full or dead,
// steal, strand or delete other pools' Machines). The API server refuses every one
// (anvil-poollet-scope), and still allows what the poollet needs to run.
func TestPoolletCannotWriteOtherPools(t *testing.T) {
	ns := newNamespace(t, "scope")
	p1, p2 := "p1-"+ns, "p2-"+ns
	for _, p := range []string{p1, p2} {
		create(t, env.Client, &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: p}})
	}
	poollet := poolletToken(t, p1) // also makes the Lease namespace
	create(t, env.Client, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: computev1alpha1.PoolLeaseNamespace, Name: p2},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(p2)}})
	mine, theirs, unbound := machine(ns, "mine", p1), machine(ns, "theirs", p2), machine(ns, "unbound", "")
	// A finalizer of someone else's, which the poollet must leave alone.
	mine.Finalizers = []string{"example.com/keep"}
	create(t, env.Client, mine, theirs, unbound)

	// patch changes the object named like o (read afresh) with change, as the poollet.
	patch := func(o client.Object, status bool, change func(client.Object)) func(context.Context) error {
		return func(ctx context.Context) error {
			cur := o.DeepCopyObject().(client.Object)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return err
			}
			p := client.MergeFrom(cur.DeepCopyObject().(client.Object))
			change(cur)
			if status {
				return poollet.Status().Patch(ctx, cur, p)
			}
			return poollet.Patch(ctx, cur, p)
		}
	}
	machineStatus := func(o client.Object) { o.(*computev1alpha1.Machine).Status.State = computev1alpha1.MachineStateRunning }
	poolStatus := func(o client.Object) {
		o.(*computev1alpha1.MachinePool).Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0")}
	}
	// renew updates a Lease as the poollet's heartbeat does.
	renew := func(pool string) func(context.Context) error {
		return func(ctx context.Context) error {
			l := &coordinationv1.Lease{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: computev1alpha1.PoolLeaseNamespace, Name: pool}, l); err != nil {
				return err
			}
			l.Spec.RenewTime = ptr.To(metav1.NowMicro())
			return poollet.Update(ctx, l)
		}
	}
	addFinalizer := func(o client.Object) { controllerutil.AddFinalizer(o, computev1alpha1.FinalizerRuntimeMachine) }
	spec := func(o client.Object) { o.(*computev1alpha1.Machine).Spec.Image = "registry.example/evil:latest" }
	bindTo := func(pool string) func(client.Object) {
		return func(o client.Object) {
			m := o.(*computev1alpha1.Machine)
			m.Spec.MachinePoolRef = nil
			if pool != "" {
				m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: pool}
			}
		}
	}
	lease := func(pool string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: computev1alpha1.PoolLeaseNamespace, Name: pool},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(pool)}}
	}
	pool := func(name string) *computev1alpha1.MachinePool {
		return &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}

	attempts := []attempt{
		// What the poollet of p1 does to run.
		{"create Lease " + p1, true, func(ctx context.Context) error { return poollet.Create(ctx, lease(p1)) }},
		{"renew Lease " + p1, true, renew(p1)},
		{"patch status of MachinePool " + p1, true, patch(pool(p1), true, poolStatus)},
		{"add its finalizer to Machine mine (bound to " + p1 + ")", true, patch(mine, false, addFinalizer)},
		{"patch status of Machine mine (bound to " + p1 + ")", true, patch(mine, true, machineStatus)},
		{"remove its finalizer from Machine mine", true, patch(mine, false, func(o client.Object) {
			controllerutil.RemoveFinalizer(o, computev1alpha1.FinalizerRuntimeMachine)
		})},
		// Another pool's heartbeat and status.
		{"patch status of MachinePool " + p2, false, patch(pool(p2), true, poolStatus)},
		{"renew Lease " + p2, false, renew(p2)},
		{"delete Lease " + p2, false, func(ctx context.Context) error { return poollet.Delete(ctx, lease(p2)) }},
		{"create Lease of a pool not its own", false, func(ctx context.Context) error { return poollet.Create(ctx, lease("other-"+ns)) }},
		{"create MachinePool not its own", false, func(ctx context.Context) error { return poollet.Create(ctx, pool("other-"+ns)) }},
		// Machines bound to another pool.
		{"add a finalizer to Machine theirs (bound to " + p2 + ")", false, patch(theirs, false, addFinalizer)},
		{"patch status of Machine theirs (bound to " + p2 + ")", false, patch(theirs, true, machineStatus)},
		{"patch status of Machine unbound", false, patch(unbound, true, machineStatus)},
		// Specs, bindings and lifetimes, of any pool's Machines.
		{"patch spec of Machine mine", false, patch(mine, false, spec)},
		{"patch spec of Machine theirs", false, patch(theirs, false, spec)},
		{"label Machine mine", false, patch(mine, false, func(o client.Object) { o.SetLabels(map[string]string{"x": "y"}) })},
		{"remove another's finalizer from Machine mine", false, patch(mine, false, func(o client.Object) {
			controllerutil.RemoveFinalizer(o, "example.com/keep")
		})},
		{"unbind Machine mine", false, patch(mine, false, bindTo(""))},
		{"bind Machine unbound to " + p1, false, patch(unbound, false, bindTo(p1))},
		{"move Machine theirs to " + p1, false, patch(theirs, false, bindTo(p1))},
		{"create a Machine bound to " + p1, false, func(ctx context.Context) error { return poollet.Create(ctx, machine(ns, "new", p1)) }},
		{"delete Machine mine", false, func(ctx context.Context) error { return poollet.Delete(ctx, machine(ns, "mine", "")) }},
		{"delete Machine theirs", false, func(ctx context.Context) error { return poollet.Delete(ctx, machine(ns, "theirs", "")) }},
	}

	tryAll(t, "poollet of "+p1, attempts, func(a attempt, err error) {
		// A refusal by the policy says which pool's poollet, and what it may write.
		if msg := err.Error(); strings.Contains(msg, "anvil-poollet-scope") && !strings.Contains(msg, "poollet of MachinePool "+p1) {
			t.Errorf("%s: %q does not name the poollet's pool", a.what, msg)
		}
	})
}
