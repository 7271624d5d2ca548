package conformance

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

func (s *suite) restartKeeps(t *testing.T) {
	a := s.create(t, s.newMachine(t))
	b := s.create(t, s.newMachine(t))
	s.await(t, a.Metadata.Id, "ran", settledIn(running))
	s.await(t, b.Metadata.Id, "ran", settledIn(running))
	if _, err := s.c.UpdateMachinePower(ctx(t), &mriv1alpha1.UpdateMachinePowerRequest{Id: b.Metadata.Id, Power: mriv1alpha1.Power_POWER_OFF}); err != nil {
		t.Fatal(err)
	}
	s.await(t, b.Metadata.Id, "shut down", settledIn(shutdown))
	before := map[string]*mriv1alpha1.Machine{a.Metadata.Id: s.get(t, a.Metadata.Id), b.Metadata.Id: s.get(t, b.Metadata.Id)}

	s.c = s.target.Restart(t)
	for id, was := range before {
		now := s.await(t, id, "listed after the restart", func(m *mriv1alpha1.Machine) bool { return m != nil })
		if !proto.Equal(now.Spec, was.Spec) || now.Metadata.Labels[mri.LabelMachineUID] != was.Metadata.Labels[mri.LabelMachineUID] {
			t.Errorf("machine %s changed across the restart:\nbefore %v\nafter  %v", id, was, now)
		}
		if now.Status.State != was.Status.State {
			t.Errorf("machine %s was %s before the restart and is %s after (R1: re-adopt, never recreate)", id, was.Status.State, now.Status.State)
		}
	}
	c := s.create(t, s.newMachine(t))
	if _, reused := before[c.Metadata.Id]; reused {
		t.Errorf("id %s reused after the restart (I1)", c.Metadata.Id)
	}
}

func (s *suite) restartMidCreate(t *testing.T) {
	m := s.newMachine(t)
	created := s.create(t, m)
	s.c = s.target.Restart(t)
	// The caller does not know whether its create survived: it lists by uid and acts (R3).
	list, err := s.c.ListMachines(ctx(t), &mriv1alpha1.ListMachinesRequest{
		LabelSelector: map[string]string{mri.LabelMachineUID: m.Metadata.Labels[mri.LabelMachineUID]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Machines) != 1 || list.Machines[0].Metadata.Id != created.Metadata.Id {
		t.Fatalf("after a restart mid-create, the uid lists %d machines %v, want exactly %s", len(list.Machines), list.Machines, created.Metadata.Id)
	}
	s.await(t, created.Metadata.Id, "finished booting after the restart (R2)", settledIn(running))
}

func (s *suite) watchEvents(t *testing.T) {
	existing := s.create(t, s.newMachine(t))
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := s.c.WatchEvents(wctx, &mriv1alpha1.WatchEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan *mriv1alpha1.MachineEvent, 1024)
	go func() {
		defer close(events)
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			events <- ev
		}
	}()
	expect := func(what string, match func(*mriv1alpha1.MachineEvent) bool) {
		t.Helper()
		timeout := time.After(s.target.Timeout)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("event stream ended before %s", what)
				}
				if match(ev) {
					return
				}
			case <-timeout:
				t.Fatalf("no event for %s within %s", what, s.target.Timeout)
			}
		}
	}
	expect("the existing machine", func(ev *mriv1alpha1.MachineEvent) bool {
		return ev.Type == mriv1alpha1.MachineEvent_TYPE_ADDED && ev.Machine.Metadata.Id == existing.Metadata.Id
	})
	fresh := s.create(t, s.newMachine(t))
	expect("the new machine", func(ev *mriv1alpha1.MachineEvent) bool {
		return ev.Type == mriv1alpha1.MachineEvent_TYPE_ADDED && ev.Machine.Metadata.Id == fresh.Metadata.Id
	})
	if _, err := s.c.DeleteMachine(ctx(t), &mriv1alpha1.DeleteMachineRequest{Id: fresh.Metadata.Id}); err != nil {
		t.Fatal(err)
	}
	expect("the deleted machine", func(ev *mriv1alpha1.MachineEvent) bool {
		return ev.Type == mriv1alpha1.MachineEvent_TYPE_DELETED && ev.Machine.Metadata.Id == fresh.Metadata.Id
	})
}
