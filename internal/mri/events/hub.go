package events

import (
	"sync"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// Hub hands every published event to every subscription. Create it with NewHub.
//
// The runtime calls Subscribe and Publish under the lock that guards its machines, so
// that no change falls between a stream's initial machines and its first event.
type Hub struct {
	buffer int

	mu     sync.Mutex
	subs   map[int]chan *mriv1alpha1.MachineEvent
	nextID int
	closed bool
}

// NewHub returns a hub whose subscriptions each hold up to buffer events not yet sent;
// one that falls further behind is dropped.
func NewHub(buffer int) *Hub {
	return &Hub{buffer: buffer, subs: map[int]chan *mriv1alpha1.MachineEvent{}}
}

// Subscription is one stream's events: the ADDED events it starts with, then what is
// published after it subscribed. Stream sends them.
type Subscription struct {
	hub     *Hub
	id      int
	initial []*mriv1alpha1.MachineEvent
	ch      chan *mriv1alpha1.MachineEvent
}

// Subscribe starts a subscription with an ADDED event for each of current, copied now.
// After Close it returns a subscription that ends at once, as a closed runtime's
// streams do.
func (h *Hub) Subscribe(current []*mriv1alpha1.Machine) *Subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		ch := make(chan *mriv1alpha1.MachineEvent)
		close(ch)
		return &Subscription{hub: h, id: -1, ch: ch}
	}
	s := &Subscription{hub: h, id: h.nextID, ch: make(chan *mriv1alpha1.MachineEvent, h.buffer)}
	h.nextID++
	for _, m := range current {
		s.initial = append(s.initial, event(mriv1alpha1.MachineEvent_TYPE_ADDED, m))
	}
	h.subs[s.id] = s.ch
	return s
}

// Publish hands an event with a copy of m to every subscription, dropping those whose
// buffer is full rather than waiting for them.
func (h *Hub) Publish(t mriv1alpha1.MachineEvent_Type, m *mriv1alpha1.Machine) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) == 0 {
		return
	}
	ev := event(t, m)
	for id, ch := range h.subs {
		select {
		case ch <- ev:
		default:
			// A dropped watcher reconnects and gets the full set again.
			h.dropLocked(id)
		}
	}
}

// Close ends every subscription, now and to come. Calling it again does nothing.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for id := range h.subs {
		h.dropLocked(id)
	}
}

// cancel ends the subscription id, unless it was dropped already.
func (h *Hub) cancel(id int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(id)
}

// dropLocked closes and forgets subscription id; mu must be held. Closing happens here
// only, once, so a channel is never closed twice.
func (h *Hub) dropLocked(id int) {
	if ch, ok := h.subs[id]; ok {
		close(ch)
		delete(h.subs, id)
	}
}

func event(t mriv1alpha1.MachineEvent_Type, m *mriv1alpha1.Machine) *mriv1alpha1.MachineEvent {
	return &mriv1alpha1.MachineEvent{Type: t, Machine: proto.Clone(m).(*mriv1alpha1.Machine)}
}
