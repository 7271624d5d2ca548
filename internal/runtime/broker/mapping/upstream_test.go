package mapping

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// created is d's Machine as the API server returns it after the create.
func created(t *testing.T, m *mriv1alpha1.Machine) (Downstream, *computev1alpha1.Machine) {
	t.Helper()
	d, err := NewDownstream(testTarget, m)
	if err != nil {
		t.Fatal(err)
	}
	dm := d.Machine.DeepCopy()
	dm.UID, dm.Generation = types.UID("down-uid-1"), 1
	dm.CreationTimestamp = metav1.NewTime(time.Unix(100, 0))
	return d, dm
}

func TestUpstreamReadsBackWhatWasCreated(t *testing.T) {
	up := machine()
	d, dm := created(t, up)
	got, err := Upstream(Observed{Machine: dm, SecretData: d.Secret.Data})
	if err != nil {
		t.Fatal(err)
	}
	if got.Metadata.Id != "down-uid-1" || got.Metadata.Generation != 1 || got.Metadata.CreatedAtUnixNano != time.Unix(100, 0).UnixNano() ||
		got.Metadata.DeletedAtUnixNano != 0 || got.Metadata.Labels[LabelUpstreamUID] != "" || got.Metadata.Annotations["note"] != "x" {
		t.Fatalf("metadata = %v", got.Metadata)
	}
	if !proto.Equal(got.Spec, up.Spec) {
		t.Fatalf("spec =\n%v\nwant\n%v", got.Spec, up.Spec)
	}
	st := got.Status
	if st.State != mriv1alpha1.MachineState_MACHINE_STATE_PENDING || st.ObservedGeneration != 0 ||
		st.Architecture != mriv1alpha1.Architecture_ARCHITECTURE_ARM64 || len(st.Volumes) != 2 || len(st.NetworkInterfaces) != 1 ||
		st.Volumes[1].State != mriv1alpha1.AttachState_ATTACH_STATE_PENDING {
		t.Fatalf("status = %v", st)
	}
}

func TestUpstreamStatus(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mut   func(*computev1alpha1.Machine, *Observed)
		check func(*testing.T, *mriv1alpha1.MachineStatus, *mriv1alpha1.ObjectMetadata)
	}{
		{"running, observed: every field mapped", func(m *computev1alpha1.Machine, _ *Observed) {
			m.Namespace, m.Name = "site-ns", "down-1"
			m.Status = computev1alpha1.MachineStatus{ObservedGeneration: 1, State: computev1alpha1.MachineStateRunning,
				Architecture: computev1alpha1.ArchitectureARM64, RebootToken: "t1",
				Addresses: []computev1alpha1.MachineAddress{{Type: "InternalIP", Address: "10.0.0.5"}},
				Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Running", Message: "running on pool p"},
					{Type: computev1alpha1.ConditionConsoleAvailable, Status: metav1.ConditionTrue, Reason: computev1alpha1.ReasonConsoleAvailable, Message: "m"}},
				Volumes:           []computev1alpha1.AttachmentStatus{{Name: "data", State: computev1alpha1.AttachStateAttached, Handle: "vdb"}},
				NetworkInterfaces: []computev1alpha1.AttachmentStatus{{Name: "eth0", State: computev1alpha1.AttachStateAttached}}}
		}, func(t *testing.T, st *mriv1alpha1.MachineStatus, _ *mriv1alpha1.ObjectMetadata) {
			want := &mriv1alpha1.MachineStatus{ObservedGeneration: 1, State: mriv1alpha1.MachineState_MACHINE_STATE_RUNNING,
				Architecture: mriv1alpha1.Architecture_ARCHITECTURE_ARM64, Console: "anvil://site-ns/down-1", RebootToken: "t1",
				Addresses: []*mriv1alpha1.Address{{Type: "InternalIP", Address: "10.0.0.5"}},
				Conditions: []*mriv1alpha1.Condition{{Type: "Ready", Status: true, Reason: "Running", Message: "running on pool p"},
					{Type: computev1alpha1.ConditionConsoleAvailable, Status: true, Reason: computev1alpha1.ReasonConsoleAvailable, Message: "m"},
					{Type: ConditionSiteReachable, Status: true, Reason: ReasonSiteReachable, Message: "the downstream site answers"}},
				Volumes: []*mriv1alpha1.AttachmentStatus{{Name: "root", State: mriv1alpha1.AttachState_ATTACH_STATE_PENDING},
					{Name: "data", State: mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED, Handle: "vdb"}},
				NetworkInterfaces: []*mriv1alpha1.AttachmentStatus{{Name: "eth0", State: mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED}}}
			if !proto.Equal(st, want) {
				t.Fatalf("status =\n%v\nwant\n%v", st, want)
			}
		}},
		{"shutdown", func(m *computev1alpha1.Machine, _ *Observed) { m.Status.State = computev1alpha1.MachineStateShutdown },
			func(t *testing.T, st *mriv1alpha1.MachineStatus, _ *mriv1alpha1.ObjectMetadata) {
				if st.State != mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN {
					t.Fatal(st.State)
				}
			}},
		{"terminated stays terminated while deleted", func(m *computev1alpha1.Machine, _ *Observed) {
			m.Status.State = computev1alpha1.MachineStateTerminated
			m.DeletionTimestamp = &metav1.Time{Time: time.Unix(200, 0)}
		}, func(t *testing.T, st *mriv1alpha1.MachineStatus, md *mriv1alpha1.ObjectMetadata) {
			if st.State != mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED || md.DeletedAtUnixNano != time.Unix(200, 0).UnixNano() {
				t.Fatal(st.State, md)
			}
		}},
		{"deleted: terminating whatever the state said", func(m *computev1alpha1.Machine, _ *Observed) {
			m.Status.State = computev1alpha1.MachineStateRunning
			m.DeletionTimestamp = &metav1.Time{Time: time.Unix(200, 0)}
		}, func(t *testing.T, st *mriv1alpha1.MachineStatus, _ *mriv1alpha1.ObjectMetadata) {
			if st.State != mriv1alpha1.MachineState_MACHINE_STATE_TERMINATING {
				t.Fatal(st.State)
			}
		}},
		{"site unreachable: last status kept, condition says so", func(m *computev1alpha1.Machine, o *Observed) {
			m.Status.State, m.Status.ObservedGeneration = computev1alpha1.MachineStateRunning, 1
			o.Unreachable, o.UnreachableMessage = true, "dial tcp: connection refused"
		}, func(t *testing.T, st *mriv1alpha1.MachineStatus, _ *mriv1alpha1.ObjectMetadata) {
			c := st.Conditions[len(st.Conditions)-1]
			if st.State != mriv1alpha1.MachineState_MACHINE_STATE_RUNNING || st.ObservedGeneration != 1 ||
				c.Type != ConditionSiteReachable || c.Status || c.Reason != ReasonSiteUnreachable || !strings.Contains(c.Message, "connection refused") {
				t.Fatal(st)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, dm := created(t, machine())
			o := Observed{Machine: dm, SecretData: d.Secret.Data}
			tc.mut(dm, &o)
			got, err := Upstream(o)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, got.Status, got.Metadata)
		})
	}
}

// TestUpstreamConsole: the broker reports a console (S5) exactly when the downstream
// Machine's pool and runtime give it one, whatever its state (a stopped machine's log is
// still read).
func TestUpstreamConsole(t *testing.T) {
	for _, tc := range []struct {
		reason string // of the downstream ConsoleAvailable condition; "" for none
		want   bool
	}{
		{"", false},
		{computev1alpha1.ReasonConsoleAvailable, true},
		{computev1alpha1.ReasonConsoleMachineNotRunning, true},
		{computev1alpha1.ReasonRuntimeHasNoConsole, false},
		{computev1alpha1.ReasonPoolServesNoConsoles, false},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			d, dm := created(t, machine())
			if tc.reason != "" {
				dm.Status.Conditions = []metav1.Condition{{Type: computev1alpha1.ConditionConsoleAvailable, Reason: tc.reason}}
			}
			got, err := Upstream(Observed{Machine: dm, SecretData: d.Secret.Data})
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tc.want {
				want = "anvil://" + dm.Namespace + "/" + dm.Name
			}
			if got.Status.Console != want {
				t.Fatalf("console %q, want %q", got.Status.Console, want)
			}
		})
	}
}

func TestObservedGeneration(t *testing.T) {
	rec := Record{Generation: 5, DownstreamGeneration: 3}
	for _, tc := range []struct{ observed, want int64 }{{0, 4}, {2, 4}, {3, 5}, {4, 5}} {
		if got := ObservedGeneration(rec, tc.observed); got != tc.want {
			t.Errorf("downstream observed %d: %d, want %d", tc.observed, got, tc.want)
		}
	}
}

func TestUpstreamOfAMachineWithoutARecordIsAnError(t *testing.T) {
	_, dm := created(t, machine())
	dm.Annotations[AnnotationRecord] = "{"
	if _, err := Upstream(Observed{Machine: dm}); err == nil || !strings.Contains(err.Error(), testUID) {
		t.Fatalf("Upstream: %v, want an error naming the Machine", err)
	}
	delete(dm.Annotations, AnnotationRecord)
	if _, err := Upstream(Observed{Machine: dm}); err == nil {
		t.Fatal("Upstream of a Machine without a record succeeded")
	}
}
