package events

import (
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// Stream sends the subscription's initial events, then each published one, until the
// client goes away, the hub closes, or the subscription is dropped for falling behind; it
// ends the subscription on return. Only a failed send is an error: the other ends are
// how a stream is meant to finish, and the client reconnects.
func (s *Subscription) Stream(stream mriv1alpha1.MachineRuntime_WatchEventsServer) error {
	defer s.hub.cancel(s.id)
	for _, ev := range s.initial {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev, ok := <-s.ch:
			if !ok {
				return nil
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}
