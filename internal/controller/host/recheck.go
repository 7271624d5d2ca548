package host

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// recheckQueue is how many Hosts may wait to be looked at again; a full queue drops the
// request, since every Host is looked at within BusyPoll or Resync anyway.
const recheckQueue = 256

// rechecks carries the Hosts to look at again at once into the controller's queue.
type rechecks struct {
	once sync.Once
	ch   chan event.GenericEvent
}

func (q *rechecks) channel() chan event.GenericEvent {
	q.once.Do(func() { q.ch = make(chan event.GenericEvent, recheckQueue) })
	return q.ch
}

// Recheck has the Host looked at now rather than at its next poll: the provisioner freed a
// slot it waits for, or lost its records. It never blocks.
func (r *Reconciler) Recheck(key types.NamespacedName) {
	h := &metalv1alpha1.Host{}
	h.Namespace, h.Name = key.Namespace, key.Name
	select {
	case r.rechecks.channel() <- event.GenericEvent{Object: h}:
	default:
	}
}

// RecheckAll rechecks every Host of namespace, waiting for room in the queue: a restarted
// provisioner may have lost every Host, and each must be enrolled again (and adopted) now.
func (r *Reconciler) RecheckAll(ctx context.Context, namespace string) {
	var hosts metalv1alpha1.HostList
	if err := r.Client.List(ctx, &hosts, client.InNamespace(namespace)); err != nil {
		log.FromContext(ctx).Error(err, "listing Hosts to look at again; they wait for their next poll", "namespace", namespace)
		return
	}
	for i := range hosts.Items {
		select {
		case r.rechecks.channel() <- event.GenericEvent{Object: &hosts.Items[i]}:
		case <-ctx.Done():
			return
		}
	}
}
