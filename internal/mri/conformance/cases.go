package conformance

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

const (
	running  = mriv1alpha1.MachineState_MACHINE_STATE_RUNNING
	shutdown = mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN
)

func (s *suite) version(t *testing.T) {
	v, err := s.c.Version(ctx(t), &mriv1alpha1.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.MriVersion != "v1alpha1" || v.RuntimeName == "" || v.Pool == "" {
		t.Fatalf("Version = %v, want mri_version v1alpha1, a runtime name and the pool it serves (I5)", v)
	}
}

func (s *suite) status(t *testing.T) {
	st, err := s.c.Status(ctx(t), &mriv1alpha1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetAllocatable().GetMilliCpu() <= 0 || st.GetAllocatable().GetMemoryBytes() <= 0 {
		t.Errorf("allocatable %v: want positive cpu and memory", st.GetAllocatable())
	}
	if len(st.Architectures) == 0 {
		t.Error("no architectures reported")
	}
	offered := map[mriv1alpha1.Architecture]bool{}
	for _, a := range st.Architectures {
		if a == mriv1alpha1.Architecture_ARCHITECTURE_UNSPECIFIED {
			t.Error("an architecture is UNSPECIFIED")
		}
		offered[a] = true
	}
	// S8: native and emulated are exclusive, each about an architecture offered; a reason
	// is given once at most, and says something.
	native := map[mriv1alpha1.Architecture]bool{}
	for _, a := range st.NativeArchitectures {
		if !offered[a] {
			t.Errorf("native architecture %s is not among the architectures %v", a, st.Architectures)
		}
		native[a] = true
	}
	explained := map[mriv1alpha1.Architecture]bool{}
	for _, r := range st.EmulationReasons {
		a := r.GetArchitecture()
		switch {
		case !offered[a]:
			t.Errorf("emulation reason for %s, not among the architectures %v", a, st.Architectures)
		case native[a]:
			t.Errorf("%s is native and has an emulation reason %q (S8)", a, r.GetReason())
		case explained[a]:
			t.Errorf("two emulation reasons for %s (S8)", a)
		case strings.TrimSpace(r.GetReason()) == "":
			t.Errorf("an empty emulation reason for %s (S8)", a)
		}
		explained[a] = true
	}
}

func (s *suite) createIdempotent(t *testing.T) {
	m := s.newMachine(t)
	first := s.create(t, m)
	again := s.create(t, clone(m))
	if again.Metadata.Id != first.Metadata.Id {
		t.Fatalf("second create with the same uid made machine %s, first was %s", again.Metadata.Id, first.Metadata.Id)
	}
	list, err := s.c.ListMachines(ctx(t), &mriv1alpha1.ListMachinesRequest{
		LabelSelector: map[string]string{mri.LabelMachineUID: m.Metadata.Labels[mri.LabelMachineUID]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Machines) != 1 {
		t.Fatalf("%d machines carry the uid, want 1", len(list.Machines))
	}
}

func (s *suite) wrongArchitecture(t *testing.T) {
	st, err := s.c.Status(ctx(t), &mriv1alpha1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	supported := map[mriv1alpha1.Architecture]bool{}
	for _, a := range st.Architectures {
		supported[a] = true
	}
	for a := range mriv1alpha1.Architecture_name {
		arch := mriv1alpha1.Architecture(a)
		if arch == mriv1alpha1.Architecture_ARCHITECTURE_UNSPECIFIED || supported[arch] {
			continue
		}
		m := s.newMachine(t)
		m.Spec.Architecture = arch
		_, err := s.c.CreateMachine(ctx(t), &mriv1alpha1.CreateMachineRequest{Machine: m})
		wantReason(t, err, codes.FailedPrecondition, mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE)
		return
	}
	t.Fatal("the runtime claims every architecture; configure it with fewer to check refusals")
}

func (s *suite) noCapacity(t *testing.T) {
	st, err := s.c.Status(ctx(t), &mriv1alpha1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	m := s.newMachine(t)
	m.Spec.Resources = &mriv1alpha1.Resources{MilliCpu: st.Allocatable.MilliCpu + 1000, MemoryBytes: m.Spec.Resources.GetMemoryBytes()}
	_, err = s.c.CreateMachine(ctx(t), &mriv1alpha1.CreateMachineRequest{Machine: m})
	wantReason(t, err, codes.ResourceExhausted, mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY)
}

// unknownID: every call naming a machine answers NOT_FOUND for an id the runtime never
// gave (E1), whatever else it is asked.
func (s *suite) unknownID(t *testing.T) {
	const id = "no-such-machine"
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"UpdateMachinePower", func() error {
			_, err := s.c.UpdateMachinePower(ctx(t), &mriv1alpha1.UpdateMachinePowerRequest{Id: id, Power: mriv1alpha1.Power_POWER_OFF})
			return err
		}},
		{"RebootMachine", func() error {
			_, err := s.c.RebootMachine(ctx(t), &mriv1alpha1.RebootMachineRequest{Id: id, Token: "r1"})
			return err
		}},
		{"ReimageMachine", func() error {
			img := &mriv1alpha1.Image{Reference: "registry.example/os:1", Digest: "sha256:" + strings.Repeat("0", 64)}
			_, err := s.c.ReimageMachine(ctx(t), &mriv1alpha1.ReimageMachineRequest{Id: id, Image: img})
			return err
		}},
		{"UpdateMachineLabels", func() error {
			_, err := s.c.UpdateMachineLabels(ctx(t), &mriv1alpha1.UpdateMachineLabelsRequest{Id: id, Labels: map[string]string{"team": "a"}})
			return err
		}},
		{"AttachVolume", func() error {
			vol := &mriv1alpha1.Volume{Name: "data", Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: 1 << 20}}}
			_, err := s.c.AttachVolume(ctx(t), &mriv1alpha1.AttachVolumeRequest{Id: id, Volume: vol})
			return err
		}},
		{"DetachVolume", func() error {
			_, err := s.c.DetachVolume(ctx(t), &mriv1alpha1.DetachVolumeRequest{Id: id, Name: "data"})
			return err
		}},
		{"AttachNetworkInterface", func() error {
			nic := &mriv1alpha1.NetworkInterface{Name: "eth1", Network: "default"}
			_, err := s.c.AttachNetworkInterface(ctx(t), &mriv1alpha1.AttachNetworkInterfaceRequest{Id: id, NetworkInterface: nic})
			return err
		}},
		{"DetachNetworkInterface", func() error {
			_, err := s.c.DetachNetworkInterface(ctx(t), &mriv1alpha1.DetachNetworkInterfaceRequest{Id: id, Name: "eth1"})
			return err
		}},
		{"DeleteMachine", func() error {
			_, err := s.c.DeleteMachine(ctx(t), &mriv1alpha1.DeleteMachineRequest{Id: id})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantReason(t, tc.call(), codes.NotFound, mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND)
		})
	}
}

func (s *suite) lifecycle(t *testing.T) {
	m := s.create(t, s.newMachine(t))
	id := m.Metadata.Id
	m = s.await(t, id, "ran", settledIn(running))
	if m.Status.Architecture != m.Spec.Architecture {
		t.Errorf("status architecture %s, spec %s", m.Status.Architecture, m.Spec.Architecture)
	}
	allAttached(t, m.Spec, m, "")
	gen := m.Metadata.Generation
	resp, err := s.c.UpdateMachinePower(ctx(t), &mriv1alpha1.UpdateMachinePowerRequest{Id: id, Power: mriv1alpha1.Power_POWER_OFF})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Machine.Metadata.Generation <= gen {
		t.Errorf("power change left generation at %d (E4)", resp.Machine.Metadata.Generation)
	}
	s.await(t, id, "shut down", settledIn(shutdown))
	if _, err := s.c.UpdateMachinePower(ctx(t), &mriv1alpha1.UpdateMachinePowerRequest{Id: id, Power: mriv1alpha1.Power_POWER_ON}); err != nil {
		t.Fatal(err)
	}
	s.await(t, id, "ran again", settledIn(running))
	if _, err := s.c.RebootMachine(ctx(t), &mriv1alpha1.RebootMachineRequest{Id: id, Token: "r1"}); err != nil {
		t.Fatal(err)
	}
	s.await(t, id, "rebooted", func(m *mriv1alpha1.Machine) bool {
		return settledIn(running)(m) && m.Status.RebootToken == "r1"
	})
	if _, err := s.c.DeleteMachine(ctx(t), &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.DeleteMachine(ctx(t), &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil && !mri.IsNotFound(err) {
		t.Fatalf("deleting a machine being deleted: %v (E3)", err)
	}
	s.await(t, id, "went away", gone)
	_, err = s.c.DeleteMachine(ctx(t), &mriv1alpha1.DeleteMachineRequest{Id: id})
	wantReason(t, err, codes.NotFound, mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND)
}

func (s *suite) repeatedCalls(t *testing.T) {
	m := s.create(t, s.newMachine(t))
	id := m.Metadata.Id
	m = s.await(t, id, "ran", settledIn(running))
	gen := m.Metadata.Generation
	calls := []func() error{
		func() error {
			_, err := s.c.UpdateMachinePower(ctx(t), &mriv1alpha1.UpdateMachinePowerRequest{Id: id, Power: mriv1alpha1.Power_POWER_ON})
			return err
		},
		func() error {
			_, err := s.c.DetachVolume(ctx(t), &mriv1alpha1.DetachVolumeRequest{Id: id, Name: "never-attached"})
			return err
		},
		func() error {
			_, err := s.c.UpdateMachineLabels(ctx(t), &mriv1alpha1.UpdateMachineLabelsRequest{Id: id, Labels: m.Metadata.Labels})
			return err
		},
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := s.c.RebootMachine(ctx(t), &mriv1alpha1.RebootMachineRequest{Id: id, Token: "once"}); err != nil {
		t.Fatal(err)
	}
	m = s.await(t, id, "rebooted", func(m *mriv1alpha1.Machine) bool { return settledIn(running)(m) && m.Status.RebootToken == "once" })
	gen2 := m.Metadata.Generation
	if gen2 != gen+1 {
		t.Errorf("generation %d after no-op calls and one reboot, want %d", gen2, gen+1)
	}
	if _, err := s.c.RebootMachine(ctx(t), &mriv1alpha1.RebootMachineRequest{Id: id, Token: "once"}); err != nil {
		t.Fatal(err)
	}
	if got := s.get(t, id).Metadata.Generation; got != gen2 {
		t.Errorf("a repeated reboot token changed the generation to %d", got)
	}
	// Labels: replaced, but the uid label is kept.
	resp, err := s.c.UpdateMachineLabels(ctx(t), &mriv1alpha1.UpdateMachineLabelsRequest{Id: id, Labels: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Machine.Metadata.Labels["team"] != "a" || resp.Machine.Metadata.Labels[mri.LabelMachineUID] == "" {
		t.Errorf("labels after update %v: want team=a and the uid label kept", resp.Machine.Metadata.Labels)
	}
}

func (s *suite) attachDetach(t *testing.T) {
	m := s.create(t, s.newMachine(t))
	id := m.Metadata.Id
	s.await(t, id, "ran", settledIn(running))
	if s.target.NoHotplug {
		s.hotplugRefused(t, id)
		return
	}
	vol := &mriv1alpha1.Volume{Name: "data", Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: 1 << 20}}}
	nic := &mriv1alpha1.NetworkInterface{Name: "eth1", Network: "default"}
	for i := 0; i < 2; i++ { // the second time changes nothing
		if _, err := s.c.AttachVolume(ctx(t), &mriv1alpha1.AttachVolumeRequest{Id: id, Volume: vol}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.c.AttachNetworkInterface(ctx(t), &mriv1alpha1.AttachNetworkInterfaceRequest{Id: id, NetworkInterface: nic}); err != nil {
			t.Fatal(err)
		}
	}
	m = s.await(t, id, "attached data and eth1", func(m *mriv1alpha1.Machine) bool {
		return settledIn(running)(m) && attached(m.Status.Volumes, "data") && attached(m.Status.NetworkInterfaces, "eth1")
	})
	other := clone(vol)
	other.Source = &mriv1alpha1.Volume_Handle{Handle: "elsewhere"}
	_, err := s.c.AttachVolume(ctx(t), &mriv1alpha1.AttachVolumeRequest{Id: id, Volume: other})
	wantReason(t, err, codes.AlreadyExists, mriv1alpha1.ErrorReason_ERROR_REASON_ALREADY_EXISTS)
	for i := 0; i < 2; i++ {
		if _, err := s.c.DetachVolume(ctx(t), &mriv1alpha1.DetachVolumeRequest{Id: id, Name: "data"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.c.DetachNetworkInterface(ctx(t), &mriv1alpha1.DetachNetworkInterfaceRequest{Id: id, Name: "eth1"}); err != nil {
			t.Fatal(err)
		}
	}
	s.await(t, id, "detached data and eth1", func(m *mriv1alpha1.Machine) bool {
		return settledIn(running)(m) && !listed(m.Status.Volumes, "data") && !listed(m.Status.NetworkInterfaces, "eth1")
	})
}

// allAttached checks that every volume and NIC of spec is attached in m's status (S3);
// when says after what, for the message.
func allAttached(t *testing.T, spec *mriv1alpha1.MachineSpec, m *mriv1alpha1.Machine, when string) {
	t.Helper()
	for _, v := range spec.Volumes {
		if !attached(m.Status.Volumes, v.Name) {
			t.Errorf("volume %s of the spec is not attached%s in status %v (S3)", v.Name, when, m.Status.Volumes)
		}
	}
	for _, n := range spec.NetworkInterfaces {
		if !attached(m.Status.NetworkInterfaces, n.Name) {
			t.Errorf("network interface %s of the spec is not attached%s in status %v (S3)", n.Name, when, m.Status.NetworkInterfaces)
		}
	}
}

func attached(list []*mriv1alpha1.AttachmentStatus, name string) bool {
	for _, a := range list {
		if a.Name == name {
			return a.State == mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED
		}
	}
	return false
}

func listed(list []*mriv1alpha1.AttachmentStatus, name string) bool {
	for _, a := range list {
		if a.Name == name {
			return true
		}
	}
	return false
}

// hotplugRefused checks a runtime that cannot hot-plug: attaching is INVALID and leaves
// the machine as it was; detaching a name it does not have succeeds (E3).
func (s *suite) hotplugRefused(t *testing.T, id string) {
	before := s.get(t, id)
	vol := &mriv1alpha1.Volume{Name: "data", Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: 1 << 20}}}
	_, err := s.c.AttachVolume(ctx(t), &mriv1alpha1.AttachVolumeRequest{Id: id, Volume: vol})
	wantReason(t, err, codes.InvalidArgument, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID)
	nic := &mriv1alpha1.NetworkInterface{Name: "eth1", Network: "default"}
	_, err = s.c.AttachNetworkInterface(ctx(t), &mriv1alpha1.AttachNetworkInterfaceRequest{Id: id, NetworkInterface: nic})
	wantReason(t, err, codes.InvalidArgument, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID)
	if _, err := s.c.DetachVolume(ctx(t), &mriv1alpha1.DetachVolumeRequest{Id: id, Name: "data"}); err != nil {
		t.Fatalf("detaching a volume that was never attached: %v (E3)", err)
	}
	if _, err := s.c.DetachNetworkInterface(ctx(t), &mriv1alpha1.DetachNetworkInterfaceRequest{Id: id, Name: "eth1"}); err != nil {
		t.Fatalf("detaching a network interface that was never attached: %v (E3)", err)
	}
	after := s.get(t, id)
	if after.Metadata.Generation != before.Metadata.Generation || listed(after.Status.Volumes, "data") || listed(after.Status.NetworkInterfaces, "eth1") {
		t.Errorf("refused attachments changed the machine:\nbefore %v\nafter  %v", before, after)
	}
}
