package fake

import (
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// watchBuffer is how many events a stream may fall behind before it is dropped and its
// client reconnects for the full list.
const watchBuffer = 4096

// WatchEvents sends every machine, then every change, until the client goes away or the
// runtime closes.
func (r *Runtime) WatchEvents(_ *mriv1alpha1.WatchEventsRequest, stream mriv1alpha1.MachineRuntime_WatchEventsServer) error {
	r.mu.Lock()
	current := make([]*mriv1alpha1.Machine, 0, len(r.machines))
	for _, m := range r.machines {
		current = append(current, m)
	}
	sub := r.events.Subscribe(current)
	r.mu.Unlock()
	return sub.Stream(stream)
}
