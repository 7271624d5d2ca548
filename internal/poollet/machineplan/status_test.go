package machineplan

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// A broker's machine says whether its site answers (SiteReachable); the Machine shows it
// as reported, drops it once the runtime no longer reports it, and shows none of the
// runtime's other conditions. (Before, no runtime condition reached the Machine: a region's
// Machine on an unreachable site looked like any Running one.)
func TestObservedStatusCarriesSiteReachable(t *testing.T) {
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 3}}
	rm := func(conds ...*mriv1alpha1.Condition) *mriv1alpha1.Machine {
		return &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Id: "id", Generation: 1},
			Spec: &mriv1alpha1.MachineSpec{Power: mriv1alpha1.Power_POWER_ON},
			Status: &mriv1alpha1.MachineStatus{ObservedGeneration: 1, State: mriv1alpha1.MachineState_MACHINE_STATE_RUNNING,
				Conditions: conds}}
	}
	unreachable := &mriv1alpha1.Condition{Type: computev1alpha1.ConditionSiteReachable, Reason: computev1alpha1.ReasonSiteUnreachable,
		Message: "the downstream site does not answer"}
	pulled := &mriv1alpha1.Condition{Type: "ImagePulled", Status: true, Reason: "Pulled"}

	st := ObservedStatus(m, rm(unreachable, pulled), "site-1", true)
	c := meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionSiteReachable)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != computev1alpha1.ReasonSiteUnreachable ||
		c.Message != unreachable.Message || c.ObservedGeneration != 3 {
		t.Fatalf("SiteReachable on the Machine = %+v, want False/%s with the runtime's message", c, computev1alpha1.ReasonSiteUnreachable)
	}
	if st.State != computev1alpha1.MachineStateRunning {
		t.Errorf("state %s, want the runtime's last (Running)", st.State)
	}
	if meta.FindStatusCondition(st.Conditions, "ImagePulled") != nil {
		t.Errorf("a runtime's own condition reached the Machine: %+v", st.Conditions)
	}

	m.Status = st
	st = ObservedStatus(m, rm(&mriv1alpha1.Condition{Type: computev1alpha1.ConditionSiteReachable, Status: true,
		Reason: computev1alpha1.ReasonSiteReachable}), "site-1", true)
	if c := meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionSiteReachable); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("once the site answers, SiteReachable = %+v, want True", c)
	}
	m.Status = st
	if st = ObservedStatus(m, rm(), "site-1", true); meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionSiteReachable) != nil {
		t.Errorf("a runtime that no longer reports SiteReachable left it on the Machine: %+v", st.Conditions)
	}
}

// A bare-metal machine whose server's power keeps failing says so on its
// Machine: ServerPowerFailing as the runtime reports it, the state the runtime saw
// (Shutdown for a server reported Off) and Ready False with the same message, never
// plainly Running. Once the runtime stops reporting it, it is gone and Ready follows the
// state again.
func TestObservedStatusCarriesServerPowerFailing(t *testing.T) {
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 2}}
	rm := func(state mriv1alpha1.MachineState, conds ...*mriv1alpha1.Condition) *mriv1alpha1.Machine {
		return &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Id: "id", Generation: 1},
			Spec:   &mriv1alpha1.MachineSpec{Power: mriv1alpha1.Power_POWER_ON},
			Status: &mriv1alpha1.MachineStatus{ObservedGeneration: 1, State: state, Conditions: conds}}
	}
	failing := &mriv1alpha1.Condition{Type: computev1alpha1.ConditionServerPowerFailing, Status: true,
		Reason: computev1alpha1.ReasonPowerChangeFailed, Message: "the last 3 attempts to switch the server on failed; retrying with back-off"}
	for _, state := range []mriv1alpha1.MachineState{mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN, mriv1alpha1.MachineState_MACHINE_STATE_RUNNING} {
		st := ObservedStatus(m, rm(state, failing), "metal", true)
		c := meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionServerPowerFailing)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != computev1alpha1.ReasonPowerChangeFailed || c.Message != failing.Message {
			t.Fatalf("%s: ServerPowerFailing on the Machine = %+v, want it as the runtime reports it", state, c)
		}
		ready := meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != computev1alpha1.ReasonPowerChangeFailed || ready.Message != failing.Message {
			t.Fatalf("%s: Ready = %+v, want False with the power failure", state, ready)
		}
		if state == mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN && st.State != computev1alpha1.MachineStateShutdown {
			t.Fatalf("state %s, want Shutdown as the runtime saw it", st.State)
		}
		m.Status = st
	}
	st := ObservedStatus(m, rm(mriv1alpha1.MachineState_MACHINE_STATE_RUNNING), "metal", true)
	if meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionServerPowerFailing) != nil || !meta.IsStatusConditionTrue(st.Conditions, computev1alpha1.ConditionReady) {
		t.Fatalf("once the power works: %+v", st.Conditions)
	}
}

// A VM whose QEMU holds its guest stopped (KVM internal error) is Running as the runtime
// says, but not Ready: GuestStopped as reported, Ready False with its reason; gone once
// the runtime no longer reports it.
func TestObservedStatusCarriesGuestStopped(t *testing.T) {
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 1}}
	rm := func(conds ...*mriv1alpha1.Condition) *mriv1alpha1.Machine {
		return &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Id: "id", Generation: 1},
			Spec:   &mriv1alpha1.MachineSpec{Power: mriv1alpha1.Power_POWER_ON},
			Status: &mriv1alpha1.MachineStatus{ObservedGeneration: 1, State: mriv1alpha1.MachineState_MACHINE_STATE_RUNNING, Conditions: conds}}
	}
	stopped := &mriv1alpha1.Condition{Type: computev1alpha1.ConditionGuestStopped, Status: true, Reason: "InternalError", Message: "QEMU holds the guest stopped"}
	st := ObservedStatus(m, rm(stopped), "qemu", true)
	ready := meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionReady)
	if st.State != computev1alpha1.MachineStateRunning || !meta.IsStatusConditionTrue(st.Conditions, computev1alpha1.ConditionGuestStopped) ||
		ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != "InternalError" || ready.Message != stopped.Message {
		t.Fatalf("state %s, conditions %+v; want Running, GuestStopped, Ready False InternalError", st.State, st.Conditions)
	}
	m.Status = st
	st = ObservedStatus(m, rm(), "qemu", true)
	if meta.FindStatusCondition(st.Conditions, computev1alpha1.ConditionGuestStopped) != nil || !meta.IsStatusConditionTrue(st.Conditions, computev1alpha1.ConditionReady) {
		t.Fatalf("once the guest runs again: %+v", st.Conditions)
	}
}

// ConsoleAvailable says whether the console can be used through the API, and why not:
// the pool serving consoles comes first, then the runtime having one for the machine
// (where it says, S5), then the machine running for typing.
func TestConsoleAvailable(t *testing.T) {
	running, stopped := mriv1alpha1.MachineState_MACHINE_STATE_RUNNING, mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN
	for _, tc := range []struct {
		name    string
		serves  bool
		console string
		state   mriv1alpha1.MachineState
		status  metav1.ConditionStatus
		reason  string
	}{
		{"running on a pool that serves consoles", true, "/var/lib/anvil/qemu/m/console.log", running, metav1.ConditionTrue, computev1alpha1.ReasonConsoleAvailable},
		{"stopped: the log only", true, "/var/lib/anvil/qemu/m/console.log", stopped, metav1.ConditionFalse, computev1alpha1.ReasonConsoleMachineNotRunning},
		{"a server: the runtime has none", true, "", running, metav1.ConditionFalse, computev1alpha1.ReasonRuntimeHasNoConsole},
		{"a poollet without an endpoint", false, "/var/lib/anvil/qemu/m/console.log", running, metav1.ConditionFalse, computev1alpha1.ReasonPoolServesNoConsoles},
		{"neither", false, "", stopped, metav1.ConditionFalse, computev1alpha1.ReasonPoolServesNoConsoles},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &computev1alpha1.Machine{}
			m.Generation = 3
			rm := &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Id: "m"},
				Status: &mriv1alpha1.MachineStatus{State: tc.state, Console: tc.console}}
			c := meta.FindStatusCondition(ObservedStatus(m, rm, "p", tc.serves).Conditions, computev1alpha1.ConditionConsoleAvailable)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || c.Message == "" || c.ObservedGeneration != 3 {
				t.Errorf("ConsoleAvailable = %+v, want %s/%s with a message", c, tc.status, tc.reason)
			}
		})
	}
}
