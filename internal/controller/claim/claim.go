package claim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/claim"
	"github.com/anvil-dev/anvil/internal/controller/index"
	"github.com/anvil-dev/anvil/internal/controller/requeue"
)

// Reasons of the Claimed condition.
const (
	ReasonClaimed   = "ClaimedByMachine"
	ReasonUnclaimed = "NotReferenced"
)

// claimable is what the controller needs of Volume and NetworkInterface.
type claimable interface {
	client.Object
	claimRef() **computev1alpha1.ClaimReference
	conditions() *[]metav1.Condition
}

type volume struct{ *computev1alpha1.Volume }

func (v volume) claimRef() **computev1alpha1.ClaimReference { return &v.Status.ClaimRef }
func (v volume) conditions() *[]metav1.Condition            { return &v.Status.Conditions }

type nic struct {
	*computev1alpha1.NetworkInterface
}

func (n nic) claimRef() **computev1alpha1.ClaimReference { return &n.Status.ClaimRef }
func (n nic) conditions() *[]metav1.Condition            { return &n.Status.Conditions }

// Reconciler decides the holder of one kind of claimable object.
type Reconciler struct {
	Client client.Client
	kind   string
	index  string
	refs   func(*computev1alpha1.Machine) []string
	wrap   func() (claimable, client.Object)
}

// +kubebuilder:rbac:groups=compute.anvil.dev,resources=volumes;networkinterfaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=volumes/status;networkinterfaces/status,verbs=get;patch
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=volumes;networkinterfaces,verbs=delete

// NewVolumeReconciler decides who holds each Volume.
func NewVolumeReconciler(c client.Client) *Reconciler {
	return &Reconciler{Client: c, kind: "volume", index: index.MachineVolumeRefs, refs: index.VolumeRefs,
		wrap: func() (claimable, client.Object) {
			v := &computev1alpha1.Volume{}
			return volume{v}, v
		}}
}

// NewNetworkInterfaceReconciler decides who holds each NetworkInterface.
func NewNetworkInterfaceReconciler(c client.Client) *Reconciler {
	return &Reconciler{Client: c, kind: "networkinterface", index: index.MachineNetworkInterfaceRefs, refs: index.NetworkInterfaceRefs,
		wrap: func() (claimable, client.Object) {
			n := &computev1alpha1.NetworkInterface{}
			return nic{n}, n
		}}
}

// Reconcile sets the object's holder.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj, raw := r.wrap()
	if err := r.Client.Get(ctx, req.NamespacedName, raw); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	machines := &computev1alpha1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(req.Namespace), client.MatchingFields{r.index: req.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	claimants := make([]claim.Claimant, 0, len(machines.Items))
	for _, m := range machines.Items {
		claimants = append(claimants, claim.Claimant{
			Name: m.Name, UID: m.UID, Created: m.CreationTimestamp.Time, Deleting: !m.DeletionTimestamp.IsZero(),
		})
	}
	if owner, ok := ephemeralOwner(raw); ok && !hasClaimant(claimants, owner) {
		// An ephemeral object lives and dies with its Machine: the Machine is gone (or no
		// longer has the template), so the object goes too.
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, raw, client.Preconditions{UID: ptr.To(raw.GetUID())}))
	}
	holder := claim.Holder(*obj.claimRef(), claimants)
	cond := metav1.Condition{Type: computev1alpha1.ConditionClaimed, Status: metav1.ConditionFalse,
		Reason: ReasonUnclaimed, Message: fmt.Sprintf("no Machine references this %s", r.kind), ObservedGeneration: raw.GetGeneration()}
	if holder != nil {
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonClaimed
		cond.Message = fmt.Sprintf("held by Machine %s", holder.Name)
		if waiting := len(claimants) - 1; waiting > 0 {
			cond.Message += fmt.Sprintf("; %d other Machine(s) reference it and are refused", waiting)
		}
	}
	if old := meta.FindStatusCondition(*obj.conditions(), cond.Type); claim.Same(*obj.claimRef(), holder) &&
		old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFromWithOptions(raw.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	*obj.claimRef() = holder
	meta.SetStatusCondition(obj.conditions(), cond)
	if err := r.Client.Status().Patch(ctx, raw, patch); err != nil {
		if apierrors.IsConflict(err) {
			return requeue.AfterConflict(), nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager watches the kind and the Machines that reference it. The field index
// must be registered (index.Register) before.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	_, raw := r.wrap()
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.kind+"-claim").
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		For(raw).
		// Called with both the old and the new Machine on update, so a dropped reference
		// releases its object too.
		Watches(&computev1alpha1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.referenced)).
		Complete(r)
}

func (r *Reconciler) referenced(_ context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*computev1alpha1.Machine)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, name := range r.refs(m) {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: m.Namespace, Name: name}})
	}
	return reqs
}

// ephemeralOwner returns the UID of the Machine that controls o, if one does.
func ephemeralOwner(o client.Object) (types.UID, bool) {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind == "Machine" && ref.APIVersion == computev1alpha1.GroupVersion.String() && ref.Controller != nil && *ref.Controller {
			return ref.UID, true
		}
	}
	return "", false
}

func hasClaimant(cs []claim.Claimant, uid types.UID) bool {
	for _, c := range cs {
		if c.UID == uid {
			return true
		}
	}
	return false
}
