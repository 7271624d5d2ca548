package host

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// indexSecrets names the Secrets a Host reads: BMC credentials and config drive.
const indexSecrets = "metal.anvil.dev/secrets"

// SetupWithManager registers the controller. workers bounds concurrent reconciles; the
// provisioner's own queue bounds concurrent deployments.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, workers int) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &metalv1alpha1.Host{}, indexSecrets, func(o client.Object) []string {
		h := o.(*metalv1alpha1.Host)
		var names []string
		if h.Spec.BMC.CredentialsSecretRef != nil {
			names = append(names, h.Spec.BMC.CredentialsSecretRef.Name)
		}
		if h.Spec.ConfigDrive != nil {
			names = append(names, h.Spec.ConfigDrive.Name)
		}
		return names
	}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("host").
		// Status writes, ours included, are not a reason to look again: that would undo
		// the back-off. Spec (generation), annotations and deletion are, and a status
		// emptied by someone else (a restore from a backup): it is written again at once.
		For(&metalv1alpha1.Host{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, statusEmptied))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.hostsReading)).
		WatchesRawSource(source.Channel(r.rechecks.channel(), &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)})
	return b.Complete(r)
}

// statusEmptied passes an update that leaves a Host's status without a provisioning state
// it had: the Host controller never writes that.
var statusEmptied = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	old, ok1 := e.ObjectOld.(*metalv1alpha1.Host)
	h, ok2 := e.ObjectNew.(*metalv1alpha1.Host)
	return ok1 && ok2 && old.Status.ProvisioningState != "" && h.Status.ProvisioningState == ""
}}

// hostsReading maps a Secret to the Hosts that read it, so a fixed credentials Secret
// registers its Hosts again at once.
func (r *Reconciler) hostsReading(ctx context.Context, o client.Object) []reconcile.Request {
	var hosts metalv1alpha1.HostList
	if err := r.Client.List(ctx, &hosts, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexSecrets: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(hosts.Items))
	for i := range hosts.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&hosts.Items[i])})
	}
	return reqs
}
