package qemu

import (
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// recordOf builds a record for decision tests: pulled, one ready disk and one NIC.
func recordOf(power mriv1alpha1.Power, change ...func(*record)) *record {
	rec := &record{
		Phase: phaseCreated,
		Machine: &mriv1alpha1.Machine{
			Metadata: &mriv1alpha1.ObjectMetadata{Id: "m", Generation: 3},
			Spec:     &mriv1alpha1.MachineSpec{Power: power},
			Status:   &mriv1alpha1.MachineStatus{},
		},
		Boot:      &osimage.Files{Kernel: "/k"},
		RootPorts: 6,
		Devices: []*device{
			{Kind: kindVolume, Name: "root", QEMUID: "vol0", Ready: true, Port: 0},
			{Kind: kindNIC, Name: "eth0", QEMUID: "nic1", Ready: true, Port: 1},
		},
	}
	for _, c := range change {
		c(rec)
	}
	return rec
}

// runningVM is what a connected, running QEMU with both devices looks like.
func runningVM(change ...func(*observed)) *observed {
	obs := &observed{seen: true, pid: 42, connected: true, runState: "running",
		plugged: map[string]bool{"vol0": true, "nic1": true}, unplugAt: map[string]time.Time{}}
	for _, c := range change {
		c(obs)
	}
	return obs
}

func TestDecide(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	grace := 10 * time.Second
	on, off := mriv1alpha1.Power_POWER_ON, mriv1alpha1.Power_POWER_OFF
	for _, tc := range []struct {
		name   string
		rec    *record
		obs    *observed
		want   action
		dev    string
		wantAt time.Time
	}{
		{"settled running", recordOf(on), runningVM(), actNone, "", time.Time{}},
		{"settled off", recordOf(off), &observed{}, actNone, "", time.Time{}},
		{"not pulled", recordOf(on, func(r *record) { r.Boot = nil }), &observed{}, actPull, "", time.Time{}},
		{"pull in flight", recordOf(on, func(r *record) { r.Boot = nil }), &observed{pulling: true}, actNone, "", time.Time{}},
		{"pull backing off", recordOf(on, func(r *record) { r.Boot = nil }), &observed{retryAt: now.Add(time.Second)}, actWait, "", now.Add(time.Second)},
		{"disk to make", recordOf(on, func(r *record) { r.Devices[0].Ready = false }), &observed{}, actPrepare, "vol0", time.Time{}},
		{"start", recordOf(on), &observed{}, actStart, "", time.Time{}},
		{"start backing off", recordOf(on), &observed{retryAt: now.Add(2 * time.Second)}, actWait, "", now.Add(2 * time.Second)},
		{"never a second QEMU beside an unreachable one", recordOf(on), &observed{pid: 42, unreachableSince: now.Add(-time.Second)}, actWait, "", now.Add(reconnectEvery)},
		{"unreachable for too long", recordOf(on), &observed{pid: 42, unreachableSince: now.Add(-time.Minute)}, actQuit, "", time.Time{}},
		{"paused", recordOf(on), runningVM(func(o *observed) { o.runState = "paused" }), actResume, "", time.Time{}},
		{"reboot wanted", recordOf(on, func(r *record) { r.RebootWanted = "t1" }), runningVM(), actReset, "", time.Time{}},
		{"reboot wanted just after a start", recordOf(on, func(r *record) { r.RebootWanted = "t1" }),
			runningVM(func(o *observed) { o.startedAt = now.Add(-time.Second / 10) }), actWait, "", now.Add(resetSettle - time.Second/10)},
		{"reboot wanted once QEMU ran a while", recordOf(on, func(r *record) { r.RebootWanted = "t1" }),
			runningVM(func(o *observed) { o.startedAt = now.Add(-resetSettle) }), actReset, "", time.Time{}},
		{"reboot done", recordOf(on, func(r *record) { r.RebootWanted = "t1"; r.Machine.Status.RebootToken = "t1" }), runningVM(), actNone, "", time.Time{}},
		{"reboot of a stopped machine", recordOf(off, func(r *record) { r.RebootWanted = "t1" }), &observed{}, actReset, "", time.Time{}},
		{"plug", recordOf(on), runningVM(func(o *observed) { delete(o.plugged, "nic1") }), actPlug, "nic1", time.Time{}},
		{"no free port", recordOf(on), runningVM(func(o *observed) { delete(o.plugged, "nic1"); o.noPort = true }), actNone, "", time.Time{}},
		{"plug backing off", recordOf(on), runningVM(func(o *observed) { delete(o.plugged, "nic1"); o.plugRetryAt = now.Add(time.Second) }), actWait, "", now.Add(time.Second)},
		{"unplug", recordOf(on, func(r *record) { r.Devices[0].Detached = true }), runningVM(), actUnplug, "vol0", time.Time{}},
		{"unplug sent", recordOf(on, func(r *record) { r.Devices[0].Detached = true }),
			runningVM(func(o *observed) { o.unplugAt["vol0"] = now.Add(-time.Second) }), actWait, "", now.Add(unplugRetry - time.Second)},
		{"unplug again", recordOf(on, func(r *record) { r.Devices[0].Detached = true }),
			runningVM(func(o *observed) { o.unplugAt["vol0"] = now.Add(-unplugRetry) }), actUnplug, "vol0", time.Time{}},
		{"release after unplug", recordOf(on, func(r *record) { r.Devices[0].Detached = true }),
			runningVM(func(o *observed) { delete(o.plugged, "vol0") }), actRelease, "vol0", time.Time{}},
		{"release while off", recordOf(off, func(r *record) { r.Devices[1].Detached = true }), &observed{}, actRelease, "nic1", time.Time{}},
		{"reimage: the power button first", recordOf(on, func(r *record) { r.Reimaging = true }), runningVM(), actPowerdown, "", time.Time{}},
		{"reimage: quit once the grace is over", recordOf(on, func(r *record) { r.Reimaging = true }),
			runningVM(func(o *observed) { o.powerdownAt, o.pressedAt = now.Add(-grace), now.Add(-time.Second) }), actQuit, "", time.Time{}},
		{"reimage: the old files go once QEMU is gone", recordOf(on, func(r *record) { r.Reimaging = true }), &observed{}, actReimage, "", time.Time{}},
		{"reimage of a machine that is off", recordOf(off, func(r *record) { r.Reimaging = true }), &observed{}, actReimage, "", time.Time{}},
		{"reimage waits for the old pull to end", recordOf(on, func(r *record) { r.Reimaging = true; r.Boot = nil }), &observed{pulling: true}, actNone, "", time.Time{}},
		{"reimage before a deletion: the deletion wins", recordOf(on, func(r *record) { r.Reimaging = true; r.Phase = phaseDeleting }), &observed{}, actTeardown, "", time.Time{}},
		{"power button", recordOf(off), runningVM(), actPowerdown, "", time.Time{}},
		{"power button again", recordOf(off), runningVM(func(o *observed) { o.powerdownAt, o.pressedAt = now.Add(-pressEvery), now.Add(-pressEvery) }), actPowerdown, "", time.Time{}},
		{"grace", recordOf(off), runningVM(func(o *observed) { o.powerdownAt, o.pressedAt = now.Add(-time.Second), now.Add(-time.Second) }), actWait, "", now.Add(pressEvery - time.Second)},
		{"grace over", recordOf(off), runningVM(func(o *observed) { o.powerdownAt, o.pressedAt = now.Add(-grace), now.Add(-time.Second) }), actQuit, "", time.Time{}},
		{"guest powered off stays off", recordOf(on, func(r *record) { r.GuestOff = true }), &observed{}, actNone, "", time.Time{}},
		{"delete a running machine", recordOf(on, func(r *record) { r.Phase = phaseDeleting }), runningVM(), actQuit, "", time.Time{}},
		{"delete an unreachable machine", recordOf(on, func(r *record) { r.Phase = phaseDeleting }), &observed{pid: 42}, actQuit, "", time.Time{}},
		{"delete a stopped machine", recordOf(on, func(r *record) { r.Phase = phaseDeleting }), &observed{}, actTeardown, "", time.Time{}},
		{"delete before the pull", recordOf(on, func(r *record) { r.Phase = phaseDeleting; r.Boot = nil }), &observed{pulling: true}, actTeardown, "", time.Time{}},
		{"failed machines stop", recordOf(on, func(r *record) { r.Failure = &failure{Reason: "WrongArchitecture"} }), runningVM(), actQuit, "", time.Time{}},
		{"failed machines stay", recordOf(on, func(r *record) { r.Failure = &failure{Reason: "WrongArchitecture"} }), &observed{}, actNone, "", time.Time{}},
	} {
		got := decide(tc.rec, tc.obs, now, grace)
		if got.action != tc.want || deviceID(got.dev) != tc.dev || !got.at.Equal(tc.wantAt) {
			t.Errorf("%s: got %s %q at %v, want %s %q at %v", tc.name, got.action, deviceID(got.dev), got.at, tc.want, tc.dev, tc.wantAt)
		}
	}
}

func TestSettledAndState(t *testing.T) {
	on, off := mriv1alpha1.Power_POWER_ON, mriv1alpha1.Power_POWER_OFF
	for _, tc := range []struct {
		name    string
		rec     *record
		obs     *observed
		state   mriv1alpha1.MachineState
		settled bool
	}{
		{"running", recordOf(on), runningVM(), mriv1alpha1.MachineState_MACHINE_STATE_RUNNING, true},
		{"running, a device not plugged yet", recordOf(on), runningVM(func(o *observed) { delete(o.plugged, "vol0") }), mriv1alpha1.MachineState_MACHINE_STATE_RUNNING, false},
		{"running, a detach pending", recordOf(on, func(r *record) { r.Devices[0].Detached = true }), runningVM(), mriv1alpha1.MachineState_MACHINE_STATE_RUNNING, false},
		{"running, reboot pending", recordOf(on, func(r *record) { r.RebootWanted = "x" }), runningVM(), mriv1alpha1.MachineState_MACHINE_STATE_RUNNING, false},
		{"asked off, still running", recordOf(off), runningVM(), mriv1alpha1.MachineState_MACHINE_STATE_RUNNING, false},
		{"off", recordOf(off), &observed{}, mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN, true},
		{"asked on, not started", recordOf(on), &observed{}, mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN, false},
		{"new, pulling", recordOf(on, func(r *record) { r.Phase, r.Boot = phaseCreating, nil }), &observed{pulling: true}, mriv1alpha1.MachineState_MACHINE_STATE_PENDING, false},
		{"new, created off", recordOf(off, func(r *record) { r.Phase = phaseCreating }), &observed{}, mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN, true},
		{"powered off by its guest", recordOf(on, func(r *record) { r.GuestOff = true }), &observed{}, mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN, true},
		{"deleting", recordOf(on, func(r *record) { r.Phase = phaseDeleting }), runningVM(), mriv1alpha1.MachineState_MACHINE_STATE_TERMINATING, false},
		{"cannot run", recordOf(on, func(r *record) { r.Boot, r.Failure = nil, &failure{Reason: "WrongArchitecture"} }), &observed{}, mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED, true},
	} {
		if got := state(tc.rec, tc.obs); got != tc.state {
			t.Errorf("%s: state %s, want %s", tc.name, got, tc.state)
		}
		if got := settled(tc.rec, tc.obs); got != tc.settled {
			t.Errorf("%s: settled %v, want %v", tc.name, got, tc.settled)
		}
	}
}

func TestStatusReportsWhatIsTrue(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	rec := recordOf(mriv1alpha1.Power_POWER_ON, func(r *record) {
		r.Machine.Spec.Hostname = "web-1"
		r.Devices[0].Path = "/s/m/disks/vol0.qcow2"
		r.Devices[1].MAC, r.Devices[1].SSHPort = "52:54:00:01:02:03", 2222
		r.Devices = append(r.Devices, &device{Kind: kindVolume, Name: "data", QEMUID: "vol2", Detached: true, Ready: true, Port: 2})
	})
	obs := runningVM(func(o *observed) { o.plugged["vol2"] = true; o.unplugAt["vol2"] = now.Add(-time.Minute) })
	observeStatus(rec, obs, "/s/m", now)
	st := rec.Machine.Status
	if st.ObservedGeneration == rec.Machine.Metadata.Generation {
		t.Error("settled while the guest still holds a detached volume")
	}
	if len(st.Volumes) != 2 || st.Volumes[1].Name != "data" || st.Volumes[1].State != mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED {
		t.Errorf("volumes %v: want root, and data still attached", st.Volumes)
	}
	if st.Volumes[0].Handle != "/s/m/disks/vol0.qcow2" || st.NetworkInterfaces[0].Handle != "52:54:00:01:02:03" {
		t.Errorf("handles %v %v", st.Volumes[0], st.NetworkInterfaces[0])
	}
	var detach *mriv1alpha1.Condition
	for _, c := range st.Conditions {
		if c.Type == CondDevices {
			detach = c
		}
	}
	if detach == nil || detach.Status || detach.Reason != "DetachPending" {
		t.Errorf("devices condition %v, want DetachPending", detach)
	}
	want := map[string]string{"Hostname": "web-1", "InternalIP": "10.0.2.15", "SSH": "127.0.0.1:2222"}
	for _, a := range st.Addresses {
		if want[a.Type] != a.Address {
			t.Errorf("address %s=%s unexpected", a.Type, a.Address)
		}
		delete(want, a.Type)
	}
	if len(want) != 0 {
		t.Errorf("addresses missing: %v", want)
	}
	if st.Console != "/s/m/console.log" {
		t.Errorf("console %q", st.Console)
	}

	// Once the guest lets go and the device is released, the status is current.
	rec.remove(rec.Devices[2])
	delete(obs.plugged, "vol2")
	observeStatus(rec, obs, "/s/m", now)
	if rec.Machine.Status.ObservedGeneration != rec.Machine.Metadata.Generation {
		t.Error("not settled once the device is gone")
	}
}

// A guest QEMU holds stopped on an error (KVM's internal error, a disk's I/O error, a
// panic) is reported as GuestStopped with QEMU's state as the reason; a running or paused
// one is not.
func TestStatusReportsAStoppedGuest(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for state, want := range map[string]string{"internal-error": "InternalError", "io-error": "IOError", "guest-panicked": "GuestPanicked", "running": "", "paused": ""} {
		rec := recordOf(mriv1alpha1.Power_POWER_ON)
		observeStatus(rec, runningVM(func(o *observed) { o.runState = state }), "/s/m", now)
		var got *mriv1alpha1.Condition
		for _, c := range rec.Machine.Status.Conditions {
			if c.Type == computev1alpha1.ConditionGuestStopped {
				got = c
			}
		}
		switch {
		case want == "" && got != nil:
			t.Errorf("%s: GuestStopped %v, want none", state, got)
		case want != "" && (got == nil || !got.Status || got.Reason != want || !strings.Contains(got.Message, state)):
			t.Errorf("%s: GuestStopped %v, want True, %s, naming the state", state, got, want)
		}
	}
}

// Right after a restart nothing has been observed yet: a call must not turn the written
// status into one describing no QEMU at all.
func TestStatusBeforeTheFirstObservationIsKept(t *testing.T) {
	rec := recordOf(mriv1alpha1.Power_POWER_ON)
	rec.Machine.Status.State = mriv1alpha1.MachineState_MACHINE_STATE_RUNNING
	rec.Machine.Status.ObservedGeneration = 3
	rec.Machine.Spec.Power = mriv1alpha1.Power_POWER_OFF
	rec.Machine.Metadata.Generation = 4
	observeStatus(rec, &observed{}, "/s/m", time.Now())
	if st := rec.Machine.Status; st.State != mriv1alpha1.MachineState_MACHINE_STATE_RUNNING || st.ObservedGeneration != 3 {
		t.Fatalf("status %v, want Running at generation 3 until the worker has looked", st)
	}
}
