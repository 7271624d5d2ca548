package fake

import (
	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// WatchEvents sends every machine, then every change, until the client goes away or the
// runtime closes.
func (r *Runtime) WatchEvents(_ *mriv1alpha1.WatchEventsRequest, stream mriv1alpha1.MachineRuntime_WatchEventsServer) error {
	ch := make(chan *mriv1alpha1.MachineEvent, 4096)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	var initial []*mriv1alpha1.MachineEvent
	for _, m := range r.machines {
		initial = append(initial, &mriv1alpha1.MachineEvent{Type: mriv1alpha1.MachineEvent_TYPE_ADDED, Machine: proto.Clone(m).(*mriv1alpha1.Machine)})
	}
	sub := r.nextSub
	r.nextSub++
	r.watchers[sub] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if cur, ok := r.watchers[sub]; ok && cur == ch {
			delete(r.watchers, sub)
			close(ch)
		}
		r.mu.Unlock()
	}()
	for _, ev := range initial {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev, ok := <-ch:
			if !ok {
				return nil // dropped or closed: the client reconnects and starts over
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}
