package qemu

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri/events"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/qmp"
)

// bareWorker is a worker of one machine whose record is rec, with no goroutines.
func bareWorker(t *testing.T, rec *record) *worker {
	t.Helper()
	state := t.TempDir()
	r := &Runtime{cfg: Config{StateDir: state, Logger: logr.Discard()}, machines: map[string]*machine{}, byUID: map[string]string{},
		events: events.NewHub(watchBuffer)}
	id := rec.Machine.Metadata.Id
	if err := os.MkdirAll(MachineDir(state, id), 0o700); err != nil {
		t.Fatal(err)
	}
	m := &machine{rec: rec, poke: make(chan struct{}, 1), obs: *runningVM()}
	r.machines[id] = m
	return &worker{r: r, id: id, m: m, dir: MachineDir(state, id), log: logr.Discard()}
}

func shutdownEvent(guest bool, reason string) qmp.Event {
	data, _ := json.Marshal(map[string]any{"guest": guest, "reason": reason})
	return qmp.Event{Name: "SHUTDOWN", Data: data, Time: time.Now()}
}

func TestGuestPowerOffKeepsTheMachineOff(t *testing.T) {
	on, off := mriv1alpha1.Power_POWER_ON, mriv1alpha1.Power_POWER_OFF
	for _, tc := range []struct {
		name     string
		power    mriv1alpha1.Power
		pressed  bool
		ev       qmp.Event
		guestOff bool
	}{
		{"the guest powered itself off", on, false, shutdownEvent(true, "guest-shutdown"), true},
		{"the runtime pressed the button, then power went on again", on, true, shutdownEvent(true, "guest-shutdown"), false},
		{"powered off as asked", off, true, shutdownEvent(true, "guest-shutdown"), false},
		{"the runtime quit QEMU", on, false, shutdownEvent(false, "host-qmp-quit"), false},
		{"a signal ended QEMU", on, false, shutdownEvent(false, "host-signal"), false},
	} {
		w := bareWorker(t, recordOf(tc.power))
		if tc.pressed {
			w.m.obs.powerdownAt = time.Now()
		}
		w.onEvent(context.Background(), tc.ev)
		if w.m.rec.GuestOff != tc.guestOff {
			t.Errorf("%s: GuestOff %v, want %v", tc.name, w.m.rec.GuestOff, tc.guestOff)
		}
	}
}

func TestDeviceDeletedEventUnplugs(t *testing.T) {
	w := bareWorker(t, recordOf(mriv1alpha1.Power_POWER_ON, func(r *record) { r.Devices[0].Detached = true }))
	w.m.obs.unplugAt["vol0"] = time.Now()
	data, _ := json.Marshal(map[string]string{"path": "/machine/peripheral/vol0/virtio-backend"})
	w.onEvent(context.Background(), qmp.Event{Name: "DEVICE_DELETED", Data: data})
	if !w.m.obs.plugged["vol0"] {
		t.Fatal("the event of a device's inner part unplugged the device")
	}
	data, _ = json.Marshal(map[string]string{"device": "vol0", "path": "/machine/peripheral/vol0"})
	w.onEvent(context.Background(), qmp.Event{Name: "DEVICE_DELETED", Data: data})
	if w.m.obs.plugged["vol0"] || !w.m.obs.plugged["nic1"] {
		t.Fatalf("plugged after DEVICE_DELETED vol0: %v", w.m.obs.plugged)
	}
	if _, pending := w.m.obs.unplugAt["vol0"]; pending {
		t.Fatal("the unplug is still pending")
	}
}
