package conformance

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Target is a runtime under test.
type Target struct {
	// Start starts the runtime and returns a client for it.
	Start func(t *testing.T) mriv1alpha1.MachineRuntimeClient
	// Restart stops the runtime and starts it again on the same state.
	Restart func(t *testing.T) mriv1alpha1.MachineRuntimeClient
	// Spec returns a machine spec the runtime can run, powered on.
	Spec func() *mriv1alpha1.MachineSpec
	// MissingImage is an image the runtime cannot find, such as Spec's reference with a
	// digest its registry lacks: a create of it is IMAGE_NOT_FOUND.
	MissingImage *mriv1alpha1.Image
	// WrongArchImage is an image the runtime finds, without an entry for the
	// architecture of Spec: a create of it is WRONG_ARCHITECTURE.
	WrongArchImage *mriv1alpha1.Image
	// OtherImage is an image the runtime runs, for Spec's architecture, other than
	// Spec's: what a machine is reimaged to.
	OtherImage *mriv1alpha1.Image
	// Timeout bounds the wait for a machine to reach a state.
	Timeout time.Duration
	// Labels are put on every machine the suite creates, besides its own: what the
	// runtime needs of its caller, such as the namespace label a bare-metal runtime
	// checks against its HostPolicies.
	Labels map[string]string
	// NoHotplug says the runtime cannot attach or detach a volume or network interface
	// of an existing machine (bare metal): the suite then checks that Attach* is refused
	// with INVALID and changes nothing, instead of checking attachments.
	NoHotplug bool
	// Console, when set, says how the runtime's machines answer at their serial console;
	// unset, the runtime has no consoles and must say so (UNIMPLEMENTED) for both calls.
	Console *ConsoleTarget
}

// Run runs the whole suite.
func Run(t *testing.T, target Target) {
	s := &suite{target: target}
	s.c = target.Start(t)
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"Version", s.version},
		{"Status", s.status},
		{"I2_CreateIsIdempotentOnUID", s.createIdempotent},
		{"E2_UnspecifiedEnumsRefused", s.unspecifiedRefused},
		{"E1_MalformedSpecRefused", s.malformedRefused},
		{"E1_WrongArchitectureRefused", s.wrongArchitecture},
		{"E1_ImageWithoutArchitectureRefused", s.imageWithoutArchitecture},
		{"E1_ImageNotFound", s.imageNotFound},
		{"E5_NoCapacityRefused", s.noCapacity},
		{"E1_UnknownIDNotFound", s.unknownID},
		{"S1_S2_Lifecycle", s.lifecycle},
		{"E3_RepeatedCallsChangeNothing", s.repeatedCalls},
		{"E8_Reimage", s.reimage},
		{"S3_AttachDetach", s.attachDetach},
		{"S4_WatchEvents", s.watchEvents},
		{"R1_RestartKeepsMachines", s.restartKeeps},
		{"R2_RestartMidCreate", s.restartMidCreate},
	} {
		t.Run(tc.name, tc.f)
	}
	if target.Console == nil {
		t.Run("C1_NoConsole", s.consoleNone)
		return
	}
	t.Run("C1_C3_ConsoleRefusals", s.consoleRefusals)
	t.Run("C2_C4_ConsoleUse", s.consoleUse)
}

type suite struct {
	target Target
	c      mriv1alpha1.MachineRuntimeClient
	n      int
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// newMachine returns a machine with a fresh uid label and the target's spec.
func (s *suite) newMachine(t *testing.T) *mriv1alpha1.Machine {
	s.n++
	labels := map[string]string{}
	maps.Copy(labels, s.target.Labels)
	labels[mri.LabelMachineUID] = fmt.Sprintf("%s-%d-%d", t.Name(), s.n, time.Now().UnixNano())
	labels["suite"] = "conformance"
	return &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: labels},
		Spec:     s.target.Spec(),
	}
}

func (s *suite) create(t *testing.T, m *mriv1alpha1.Machine) *mriv1alpha1.Machine {
	t.Helper()
	resp, err := s.c.CreateMachine(ctx(t), &mriv1alpha1.CreateMachineRequest{Machine: m})
	if err != nil {
		t.Fatalf("CreateMachine: %v", err)
	}
	if resp.GetMachine().GetMetadata().GetId() == "" {
		t.Fatal("CreateMachine returned a machine without an id (I1)")
	}
	t.Cleanup(func() {
		_, _ = s.c.DeleteMachine(context.Background(), &mriv1alpha1.DeleteMachineRequest{Id: resp.Machine.Metadata.Id})
	})
	return resp.Machine
}

// get lists one machine by id; nil when it is gone.
func (s *suite) get(t *testing.T, id string) *mriv1alpha1.Machine {
	t.Helper()
	resp, err := s.c.ListMachines(ctx(t), &mriv1alpha1.ListMachinesRequest{Id: id})
	if err != nil {
		t.Fatalf("ListMachines: %v", err)
	}
	switch len(resp.Machines) {
	case 0:
		return nil
	case 1:
		return resp.Machines[0]
	}
	t.Fatalf("ListMachines by id %s returned %d machines", id, len(resp.Machines))
	return nil
}

// await waits until cond holds for the machine (nil once gone) and the status is current.
func (s *suite) await(t *testing.T, id, what string, cond func(*mriv1alpha1.Machine) bool) *mriv1alpha1.Machine {
	t.Helper()
	deadline := time.Now().Add(s.target.Timeout)
	var m *mriv1alpha1.Machine
	for time.Now().Before(deadline) {
		m = s.get(t, id)
		if cond(m) {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("machine %s never %s within %s; last seen %v", id, what, s.target.Timeout, m)
	return nil
}

func settledIn(state mriv1alpha1.MachineState) func(*mriv1alpha1.Machine) bool {
	return func(m *mriv1alpha1.Machine) bool {
		return m != nil && m.Status.GetObservedGeneration() == m.Metadata.GetGeneration() && m.Status.GetState() == state
	}
}

func gone(m *mriv1alpha1.Machine) bool { return m == nil }

func wantReason(t *testing.T, err error, code codes.Code, reason mriv1alpha1.ErrorReason) {
	t.Helper()
	if err == nil {
		t.Fatalf("call succeeded, want %s/%s", code, reason)
	}
	if got := status.Code(err); got != code {
		t.Errorf("code %s, want %s (%v)", got, code, err)
	}
	if got := mri.ReasonOf(err); got != reason {
		t.Errorf("reason %s, want %s (%v)", got, reason, err)
	}
}

func clone[T proto.Message](m T) T { return proto.Clone(m).(T) }
