package kit

import (
	"sync"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/events"
)

// watchBuffer is how many events a stream may fall behind before it is dropped and its
// client reconnects for the full list.
const watchBuffer = 1024

// Views are the machines a runtime reports, each made from one object of its own (a Host,
// a downstream Machine) and held under that object's name with what the runtime keeps
// beside it (T), and the stream of their changes. Stored machines are never modified:
// Set replaces them, and readers get copies.
type Views[T any] struct {
	mu    sync.Mutex
	byKey map[string]view[T]
	byID  map[string]string
	hub   *events.Hub
}

type view[T any] struct {
	machine *mriv1alpha1.Machine
	extra   T
}

// NewViews makes an empty set of views.
func NewViews[T any]() *Views[T] {
	return &Views[T]{byKey: map[string]view[T]{}, byID: map[string]string{}, hub: events.NewHub(watchBuffer)}
}

// Set makes m (nil: none) the machine of the object key, and tells the streams what
// changed: DELETED for a machine that went or whose id changed, then ADDED or MODIFIED. A
// machine whose id another object already carries is not taken (only an edit outside the
// runtime's rules does that): Set reports false, and the first keeps it.
func (v *Views[T]) Set(key string, m *mriv1alpha1.Machine, extra T) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	prev, had := v.byKey[key]
	if had && (m == nil || m.GetMetadata().GetId() != prev.machine.GetMetadata().GetId()) {
		delete(v.byKey, key)
		delete(v.byID, prev.machine.GetMetadata().GetId())
		v.hub.Publish(mriv1alpha1.MachineEvent_TYPE_DELETED, prev.machine)
		had = false
	}
	if m == nil {
		return true
	}
	id := m.GetMetadata().GetId()
	if other, taken := v.byID[id]; taken && other != key {
		return false
	}
	v.byKey[key], v.byID[id] = view[T]{machine: m, extra: extra}, key
	switch {
	case !had:
		v.hub.Publish(mriv1alpha1.MachineEvent_TYPE_ADDED, m)
	case !proto.Equal(prev.machine, m):
		v.hub.Publish(mriv1alpha1.MachineEvent_TYPE_MODIFIED, m)
	}
	return true
}

// ByID is a copy of the machine with id, the name of the object it is made from and what
// the runtime keeps beside it; NOT_FOUND when there is none.
func (v *Views[T]) ByID(id string) (*mriv1alpha1.Machine, string, T, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	key, ok := v.byID[id]
	if !ok {
		var zero T
		return nil, "", zero, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "machine %q not found", id)
	}
	w := v.byKey[key]
	return proto.Clone(w.machine).(*mriv1alpha1.Machine), key, w.extra, nil
}

// ByKey is a copy of the machine made from the object key, nil when there is none.
func (v *Views[T]) ByKey(key string) (*mriv1alpha1.Machine, T) {
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.byKey[key]
	if !ok {
		return nil, w.extra
	}
	return proto.Clone(w.machine).(*mriv1alpha1.Machine), w.extra
}

// Peek is the id of the machine made from the object key and what the runtime keeps
// beside it, without a copy of the machine; ok is false when there is none.
func (v *Views[T]) Peek(key string) (id string, extra T, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.byKey[key]
	return w.machine.GetMetadata().GetId(), w.extra, ok
}

// Each calls fn with every machine (not a copy: fn must not keep or change it).
func (v *Views[T]) Each(fn func(key string, m *mriv1alpha1.Machine, extra T)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for key, w := range v.byKey {
		fn(key, w.machine, w.extra)
	}
}

// Len is how many machines there are.
func (v *Views[T]) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.byKey)
}

// List answers ListMachines: copies of the machines the request selects.
func (v *Views[T]) List(req *mriv1alpha1.ListMachinesRequest) *mriv1alpha1.ListMachinesResponse {
	v.mu.Lock()
	defer v.mu.Unlock()
	resp := &mriv1alpha1.ListMachinesResponse{}
	for _, w := range v.byKey {
		if mri.Lists(req, w.machine) {
			resp.Machines = append(resp.Machines, proto.Clone(w.machine).(*mriv1alpha1.Machine))
		}
	}
	return resp
}

// Watch answers WatchEvents: every machine, then every change, until the client goes
// away or the views close.
func (v *Views[T]) Watch(stream mriv1alpha1.MachineRuntime_WatchEventsServer) error {
	v.mu.Lock()
	current := make([]*mriv1alpha1.Machine, 0, len(v.byKey))
	for _, w := range v.byKey {
		current = append(current, w.machine)
	}
	sub := v.hub.Subscribe(current)
	v.mu.Unlock()
	return sub.Stream(stream)
}

// Close ends every stream.
func (v *Views[T]) Close() { v.hub.Close() }
