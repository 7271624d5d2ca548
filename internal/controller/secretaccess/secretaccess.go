package secretaccess

import (
	"context"
	"fmt"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/index"
)

const (
	// PoolletNamespace holds the poollets' ServiceAccounts, one per pool: poollet-<pool>.
	PoolletNamespace = "anvil-system"
	// LabelPool marks the Roles and RoleBindings made for a pool.
	LabelPool = "compute.anvil.dev/poollet-pool"
)

// ServiceAccountName is the name of the pool's poollet ServiceAccount.
func ServiceAccountName(pool string) string { return "poollet-" + pool }

// BindingName is the name of the ClusterRoleBinding, and of the RoleBinding in the Lease
// namespace, that bind the pool's poollet ServiceAccount to the shipped poollet roles
// (config/rbac's InstallPoollet and a DaemonSet's poollet, internal/poollet/identity).
func BindingName(pool string) string { return "anvil-" + ServiceAccountName(pool) }

// roleName is the name of the pool's Role and RoleBinding in each tenant namespace.
func roleName(pool string) string { return "anvil-poollet-" + pool + "-secrets" }

// Reconciler maintains one pool's Secret Roles.
type Reconciler struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Reconcile makes the pool's Roles grant get on exactly the referenced Secrets. (Granting
// get on Secrets requires holding it: the manager's own role carries get on secrets for
// that reason, never list or watch.)
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := req.Name
	machines := &computev1alpha1.MachineList{}
	if err := r.Client.List(ctx, machines, client.MatchingFields{index.MachinePool: pool}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	want := map[string][]string{} // namespace -> secret names
	for _, m := range machines.Items {
		for _, ref := range []*computev1alpha1.SecretKeySelector{m.Spec.IgnitionRef, m.Spec.UserDataRef} {
			if ref != nil {
				want[m.Namespace] = append(want[m.Namespace], ref.Name)
			}
		}
	}
	for ns, names := range want {
		if err := r.ensure(ctx, pool, ns, dedupe(names)); err != nil {
			return ctrl.Result{}, err
		}
	}
	roles := &rbacv1.RoleList{}
	if err := r.Client.List(ctx, roles, client.MatchingLabels{LabelPool: pool}); err != nil {
		return ctrl.Result{}, err
	}
	for i := range roles.Items {
		if _, used := want[roles.Items[i].Namespace]; used {
			continue
		}
		for _, o := range []client.Object{&roles.Items[i], &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{
			Namespace: roles.Items[i].Namespace, Name: roles.Items[i].Name}}} {
			if err := r.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) ensure(ctx context.Context, pool, ns string, secrets []string) error {
	meta := metav1.ObjectMeta{Namespace: ns, Name: roleName(pool), Labels: map[string]string{LabelPool: pool}}
	role := &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: secrets}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName(pool)},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: PoolletNamespace, Name: ServiceAccountName(pool)}}}
	if err := r.upsert(ctx, role, func(have client.Object) bool {
		h := have.(*rbacv1.Role)
		if equality.Semantic.DeepEqual(h.Rules, role.Rules) {
			return false
		}
		h.Rules = role.Rules
		return true
	}); err != nil {
		return fmt.Errorf("Role %s/%s: %w", ns, role.Name, err)
	}
	return r.upsert(ctx, binding, func(have client.Object) bool {
		h := have.(*rbacv1.RoleBinding)
		if equality.Semantic.DeepEqual(h.Subjects, binding.Subjects) {
			return false
		}
		h.Subjects = binding.Subjects
		return true
	})
}

// upsert creates want, or updates the existing object when change says it differs.
func (r *Reconciler) upsert(ctx context.Context, want client.Object, change func(have client.Object) bool) error {
	have := want.DeepCopyObject().(client.Object)
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		return client.IgnoreAlreadyExists(r.Client.Create(ctx, want))
	}
	if err != nil || !change(have) {
		return err
	}
	return r.Client.Update(ctx, have)
}

func dedupe(names []string) []string {
	sort.Strings(names)
	out := names[:0]
	for i, n := range names {
		if i == 0 || n != names[i-1] {
			out = append(out, n)
		}
	}
	return out
}

// SetupWithManager reconciles per pool, triggered by the pool's Machines and its Roles.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toPool := func(_ context.Context, o client.Object) []reconcile.Request {
		if m, ok := o.(*computev1alpha1.Machine); ok && m.Spec.MachinePoolRef != nil {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: m.Spec.MachinePoolRef.Name}}}
		}
		if pool := o.GetLabels()[LabelPool]; pool != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: pool}}}
		}
		return nil
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("secretaccess").
		For(&computev1alpha1.MachinePool{}).
		Watches(&computev1alpha1.Machine{}, handler.EnqueueRequestsFromMapFunc(toPool), builder.WithPredicates(secretsOrPoolChanged)).
		Watches(&rbacv1.Role{}, handler.EnqueueRequestsFromMapFunc(toPool)).
		Complete(r)
}

// secretsOrPoolChanged passes the Machine events that can change a pool's Secret access:
// a Machine with a Secret appearing or going, or one whose binding or Secret refs change.
// Status updates, the bulk of Machine events, pass nothing.
var secretsOrPoolChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return usesSecret(e.Object) },
	DeleteFunc: func(e event.DeleteEvent) bool { return usesSecret(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*computev1alpha1.Machine)
		b, okB := e.ObjectNew.(*computev1alpha1.Machine)
		if !okA || !okB {
			return true
		}
		return (usesSecret(a) || usesSecret(b)) && (!equality.Semantic.DeepEqual(a.Spec.MachinePoolRef, b.Spec.MachinePoolRef) ||
			!equality.Semantic.DeepEqual(a.Spec.IgnitionRef, b.Spec.IgnitionRef) ||
			!equality.Semantic.DeepEqual(a.Spec.UserDataRef, b.Spec.UserDataRef))
	},
	GenericFunc: func(event.GenericEvent) bool { return true },
}

func usesSecret(o client.Object) bool {
	m, ok := o.(*computev1alpha1.Machine)
	return ok && (m.Spec.IgnitionRef != nil || m.Spec.UserDataRef != nil)
}
