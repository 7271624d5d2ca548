package fake

import (
	"fmt"
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// unsettled reports whether the machine's status still lags its spec.
func unsettled(m *mriv1alpha1.Machine) bool {
	return m.GetStatus().GetObservedGeneration() < m.GetMetadata().GetGeneration()
}

// stepLocked carries the machine towards its spec: at once without latency, else after
// Latency plus jitter. mu must be held.
func (r *Runtime) stepLocked(id string) {
	if r.cfg.Latency == 0 && r.cfg.Jitter == 0 {
		r.settleLocked(id)
		return
	}
	r.scheduleSettle(id)
}

func (r *Runtime) scheduleSettle(id string) {
	d := r.cfg.Latency
	if r.cfg.Jitter > 0 {
		d += time.Duration(r.rng.Int63n(int64(r.cfg.Jitter)))
	}
	time.AfterFunc(d, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.closed {
			r.settleLocked(id)
		}
	})
}

// settleLocked makes the status match the spec, or, for a deleted machine, removes it.
// A silent failure loses the step: the status stays behind until the call is repeated.
func (r *Runtime) settleLocked(id string) {
	m, ok := r.machines[id]
	if !ok || !unsettled(m) && m.Metadata.DeletedAtUnixNano == 0 {
		return
	}
	if r.silentFailure() {
		return
	}
	if m.Metadata.DeletedAtUnixNano != 0 {
		delete(r.machines, id)
		delete(r.byUID, m.Metadata.Labels[mri.LabelMachineUID])
		delete(r.consoles, id)
		r.changed(mriv1alpha1.MachineEvent_TYPE_DELETED, m)
		return
	}
	st := m.Status
	st.ObservedGeneration = m.Metadata.Generation
	st.Architecture = m.Spec.Architecture
	if m.Spec.Power == mriv1alpha1.Power_POWER_ON {
		if st.State != mriv1alpha1.MachineState_MACHINE_STATE_RUNNING {
			fmt.Fprintf(r.consoleLocked(id), "fake machine %s: running\n", id)
		}
		st.State = mriv1alpha1.MachineState_MACHINE_STATE_RUNNING
	} else {
		st.State = mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN
	}
	st.RebootToken = m.Metadata.Annotations[rebootAnnotation]
	st.Volumes = st.Volumes[:0]
	for _, v := range m.Spec.Volumes {
		st.Volumes = append(st.Volumes, &mriv1alpha1.AttachmentStatus{Name: v.Name, State: mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED, Handle: id + "/" + v.Name})
	}
	st.NetworkInterfaces = st.NetworkInterfaces[:0]
	for _, n := range m.Spec.NetworkInterfaces {
		st.NetworkInterfaces = append(st.NetworkInterfaces, &mriv1alpha1.AttachmentStatus{Name: n.Name, State: mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED})
	}
	st.Addresses = []*mriv1alpha1.Address{{Type: "InternalIP", Address: fakeIP(m.Metadata.Id)}}
	st.Console = "fake://" + id + "/console"
	r.changed(mriv1alpha1.MachineEvent_TYPE_MODIFIED, m)
}

// fakeIP derives a stable address in 10.0.0.0/8 from the id.
func fakeIP(id string) string {
	var h uint32 = 2166136261
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return fmt.Sprintf("10.%d.%d.%d", byte(h>>16), byte(h>>8), byte(h)|1)
}

// changed persists the state and tells watchers. mu must be held.
func (r *Runtime) changed(t mriv1alpha1.MachineEvent_Type, m *mriv1alpha1.Machine) {
	r.persistLocked()
	r.events.Publish(t, m)
}
