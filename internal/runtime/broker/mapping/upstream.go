package mapping

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// The condition every brokered machine carries about the downstream site's API: the
// Machine's own (the poollet shows it upstream as it is).
const (
	ConditionSiteReachable = computev1alpha1.ConditionSiteReachable
	ReasonSiteReachable    = computev1alpha1.ReasonSiteReachable
	// ReasonSiteUnreachable: the downstream API could not be read lately; the rest of the
	// status is the last seen, and nothing is deleted for it.
	ReasonSiteUnreachable = computev1alpha1.ReasonSiteUnreachable
)

// Observed is what the broker has read downstream of one machine.
type Observed struct {
	Machine *computev1alpha1.Machine
	// SecretData is the first-boot Secret's data, nil when there is none.
	SecretData map[string][]byte
	// Unreachable says the downstream API has not answered lately (its message in
	// UnreachableMessage): the Machine is as last seen.
	Unreachable        bool
	UnreachableMessage string
}

// Upstream is the MRI machine the downstream Machine o shows: its identity from the
// Machine (id = its UID, never reused), its labels, generation and spec from the record,
// its status from the Machine's status. A Machine without a readable record is an error.
func Upstream(o Observed) (*mriv1alpha1.Machine, error) {
	dm := o.Machine
	rec, spec, err := DecodeRecord(dm.Annotations[AnnotationRecord])
	if err != nil {
		return nil, fmt.Errorf("machine %s/%s: %w", dm.Namespace, dm.Name, err)
	}
	if key := secretKey(spec.GetFirstBoot().GetFormat()); key != "" {
		spec.FirstBoot.Data = o.SecretData[key]
	}
	meta := &mriv1alpha1.ObjectMetadata{
		Id: string(dm.UID), Labels: rec.Labels, Annotations: rec.Annotations, Generation: rec.Generation,
		CreatedAtUnixNano: dm.CreationTimestamp.UnixNano(),
	}
	if dm.DeletionTimestamp != nil {
		meta.DeletedAtUnixNano = dm.DeletionTimestamp.UnixNano()
	}
	return &mriv1alpha1.Machine{Metadata: meta, Spec: spec, Status: status(o, rec, spec)}, nil
}

var stateToMRI = map[computev1alpha1.MachineState]mriv1alpha1.MachineState{
	computev1alpha1.MachineStatePending:     mriv1alpha1.MachineState_MACHINE_STATE_PENDING,
	computev1alpha1.MachineStateRunning:     mriv1alpha1.MachineState_MACHINE_STATE_RUNNING,
	computev1alpha1.MachineStateShutdown:    mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN,
	computev1alpha1.MachineStateTerminating: mriv1alpha1.MachineState_MACHINE_STATE_TERMINATING,
	computev1alpha1.MachineStateTerminated:  mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED,
}

func status(o Observed, rec Record, spec *mriv1alpha1.MachineSpec) *mriv1alpha1.MachineStatus {
	ds := o.Machine.Status
	st := &mriv1alpha1.MachineStatus{
		ObservedGeneration: ObservedGeneration(rec, ds.ObservedGeneration),
		State:              stateToMRI[ds.State],
		Architecture:       mri.ArchToMRI(ds.Architecture),
		Console:            console(o.Machine),
		RebootToken:        ds.RebootToken,
	}
	if st.State == mriv1alpha1.MachineState_MACHINE_STATE_UNSPECIFIED {
		st.State = mriv1alpha1.MachineState_MACHINE_STATE_PENDING
	}
	if o.Machine.DeletionTimestamp != nil && st.State != mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED {
		st.State = mriv1alpha1.MachineState_MACHINE_STATE_TERMINATING
	}
	if st.Architecture == mriv1alpha1.Architecture_ARCHITECTURE_UNSPECIFIED {
		st.Architecture = spec.GetArchitecture()
	}
	for _, a := range ds.Addresses {
		st.Addresses = append(st.Addresses, &mriv1alpha1.Address{Type: a.Type, Address: a.Address})
	}
	for _, c := range ds.Conditions {
		st.Conditions = append(st.Conditions, &mriv1alpha1.Condition{Type: c.Type,
			Status: c.Status == metav1.ConditionTrue, Reason: c.Reason, Message: c.Message})
	}
	site := &mriv1alpha1.Condition{Type: ConditionSiteReachable, Status: true, Reason: ReasonSiteReachable,
		Message: "the downstream site answers"}
	if o.Unreachable {
		site = &mriv1alpha1.Condition{Type: ConditionSiteReachable, Reason: ReasonSiteUnreachable,
			Message: "the downstream site does not answer; the status is the last seen: " + o.UnreachableMessage}
	}
	st.Conditions = append(st.Conditions, site)
	st.Volumes = attachments(names(spec.GetVolumes()), ds.Volumes)
	st.NetworkInterfaces = attachments(names(spec.GetNetworkInterfaces()), ds.NetworkInterfaces)
	return st
}

// ObservedGeneration is the MRI generation the downstream status describes (S1): the
// record's once the downstream Machine has observed the generation the record was
// written at, else the one before it.
func ObservedGeneration(rec Record, downstreamObserved int64) int64 {
	if downstreamObserved >= rec.DownstreamGeneration {
		return rec.Generation
	}
	return rec.Generation - 1
}

// attachments is the attach state of every volume or NIC of the spec (S3), Pending for
// one the downstream does not report yet.
func attachments(spec []string, ds []computev1alpha1.AttachmentStatus) []*mriv1alpha1.AttachmentStatus {
	var out []*mriv1alpha1.AttachmentStatus
	for _, n := range spec {
		a := &mriv1alpha1.AttachmentStatus{Name: n, State: mriv1alpha1.AttachState_ATTACH_STATE_PENDING}
		for _, d := range ds {
			if d.Name == n {
				a.Handle = d.Handle
				if d.State == computev1alpha1.AttachStateAttached {
					a.State = mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED
				}
			}
		}
		out = append(out, a)
	}
	return out
}

func names[T interface{ GetName() string }](list []T) []string {
	out := make([]string, 0, len(list))
	for _, x := range list {
		out = append(out, x.GetName())
	}
	return out
}

// console is what the broker reports as the machine's console (CONTRACT.md S5): the
// downstream Machine, whose console the broker reaches through the downstream console
// API, when that Machine's pool and runtime give it one; empty when its ConsoleAvailable
// condition says they give none (or it has not been written yet).
func console(m *computev1alpha1.Machine) string {
	c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionConsoleAvailable)
	if c == nil || c.Reason == computev1alpha1.ReasonRuntimeHasNoConsole || c.Reason == computev1alpha1.ReasonPoolServesNoConsoles {
		return ""
	}
	return "anvil://" + m.Namespace + "/" + m.Name
}
