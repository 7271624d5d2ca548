package poollet

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// runtimeEvents streams the runtime's machine events into the Machine controller as
// triggers: each names the Machine (by the labels the poollet set) to reconcile. The
// stream is reopened after any error; a reopened stream starts with every machine, so no
// change to a machine that is still there is lost. A machine that went in between sends
// nothing: the reconciler looks again at a deletion it waits for (StuckAfter).
type runtimeEvents struct {
	runtime mriv1alpha1.MachineRuntimeClient
	out     chan event.TypedGenericEvent[*computev1alpha1.Machine]
}

func (e *runtimeEvents) Start(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if err := e.stream(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).V(1).Info("runtime event stream ended; reopening", "error", err, "after", backoff)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
	return nil
}

func (e *runtimeEvents) stream(ctx context.Context) error {
	s, err := e.runtime.WatchEvents(ctx, &mriv1alpha1.WatchEventsRequest{})
	if err != nil {
		return err
	}
	for {
		ev, err := s.Recv()
		if err != nil {
			return err
		}
		labels := ev.GetMachine().GetMetadata().GetLabels()
		ns, name := labels[LabelMachineNamespace], labels[LabelMachineName]
		if ns == "" || name == "" {
			continue // not one of ours
		}
		m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		select {
		case e.out <- event.TypedGenericEvent[*computev1alpha1.Machine]{Object: m}:
		case <-ctx.Done():
			return nil
		}
	}
}
