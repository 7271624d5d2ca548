package qemu

import (
	"context"
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/qmp"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// worker drives one machine towards its spec. It alone touches the machine's QEMU and
// files, so steps never race; calls only change the record and wake it.
type worker struct {
	r      *Runtime
	id     string
	m      *machine
	dir    string
	socket string
	log    logr.Logger

	proc *vm.Process
	qmp  *qmp.Client
}

const (
	// qmpTimeout bounds one QMP command; QEMU answers in milliseconds unless it is stuck.
	qmpTimeout = 10 * time.Second
	// stableAfter is how long a QEMU must run before earlier crashes are forgotten.
	stableAfter = time.Minute
)

func (r *Runtime) startWorker(id string, m *machine) {
	w := &worker{
		r: r, id: id, m: m, dir: MachineDir(r.cfg.StateDir, id), socket: qmpSocketPath(r.cfg.StateDir, id),
		log: r.cfg.Logger.WithValues("machine", id),
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		w.run(r.ctx)
	}()
}

func (w *worker) run(ctx context.Context) {
	defer func() {
		// The runtime is closing: let go of QMP and leave the record as it is, so the
		// next runtime starts from the last status actually observed.
		if w.qmp != nil {
			w.qmp.Close()
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wake, gone := w.pass(ctx)
		if gone || ctx.Err() != nil {
			return
		}
		if wake.IsZero() {
			timer.Stop()
		} else {
			timer.Reset(time.Until(wake))
		}
		var events <-chan qmp.Event
		if w.qmp != nil {
			events = w.qmp.Events()
		}
		select {
		case <-ctx.Done():
			return
		case <-w.m.poke:
		case <-timer.C:
		case ev, ok := <-events:
			if !ok {
				w.disconnect() // QEMU exited, or closed the monitor
				continue
			}
			w.onEvent(ctx, ev)
		}
	}
}

// pass observes, decides and carries out steps until the machine is settled or waits for
// something. It returns when to look again (zero: on the next call or event) and whether
// the machine is gone.
func (w *worker) pass(ctx context.Context) (wake time.Time, gone bool) {
	for range 32 {
		if ctx.Err() != nil {
			return time.Time{}, true
		}
		w.observe(ctx)
		w.r.mu.Lock()
		st := decide(w.m.rec, &w.m.obs, time.Now(), w.r.cfg.PowerOffGrace)
		w.commitLocked()
		w.r.mu.Unlock()
		switch st.action {
		case actNone:
			return time.Time{}, false
		case actWait:
			return st.at, false
		}
		if st.action != actPull {
			w.log.V(1).Info("step", "action", st.action, "device", deviceID(st.dev))
		}
		if w.execute(ctx, st) {
			return time.Time{}, true
		}
	}
	return time.Now().Add(time.Second), false // a busy machine yields for a moment
}

func deviceID(d *device) string {
	if d == nil {
		return ""
	}
	return d.QEMUID
}

func (w *worker) execute(ctx context.Context, st step) (gone bool) {
	switch st.action {
	case actPull:
		w.startPull()
	case actPrepare:
		w.prepare(ctx, st.dev.QEMUID)
	case actStart:
		w.start(ctx)
	case actResume:
		w.command(ctx, "cont", nil)
	case actReset:
		w.reset(ctx)
	case actPlug:
		w.plug(ctx, st.dev.QEMUID)
	case actUnplug:
		w.unplug(ctx, st.dev.QEMUID)
	case actRelease:
		w.release(ctx, st.dev.QEMUID)
	case actPowerdown:
		if w.command(ctx, "system_powerdown", nil) {
			w.update(func(m *machine) {
				if m.obs.powerdownAt.IsZero() {
					m.obs.powerdownAt = time.Now()
				}
				m.obs.pressedAt = time.Now()
			})
		}
	case actQuit:
		w.quit(ctx)
	case actTeardown:
		return w.teardown()
	case actReimage:
		w.reimage()
	}
	return false
}

// commitLocked writes the machine's record when it changed; mu must be held.
func (w *worker) commitLocked() {
	if err := w.r.commitLocked(w.id, w.m); err != nil {
		w.log.Error(err, "record not written; retrying on the next step")
	}
}

// update changes the machine under the lock and commits.
func (w *worker) update(change func(m *machine)) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	change(w.m)
	w.commitLocked()
}

// observe finds the machine's QEMU and connects to it, or refreshes its run state.
func (w *worker) observe(ctx context.Context) {
	defer w.update(func(m *machine) { m.obs.seen = true })
	if w.qmp != nil {
		qctx, cancel := context.WithTimeout(ctx, qmpTimeout)
		st, err := w.qmp.QueryStatus(qctx)
		cancel()
		if err == nil {
			w.update(func(m *machine) {
				m.obs.runState = st.Status
				if m.obs.failures > 0 && !m.obs.startedAt.IsZero() && time.Since(m.obs.startedAt) > stableAfter {
					m.obs.failures, m.obs.startErr = 0, ""
				}
			})
			return
		}
		w.disconnect()
	}
	if w.proc == nil || !w.proc.Alive(w.socket) {
		w.proc = nil
		if p, ok := vm.Find(filepath.Join(w.dir, pidFile), w.socket); ok {
			w.proc = p
		}
	}
	if w.proc == nil {
		w.update(func(m *machine) {
			if m.obs.pid != 0 && m.obs.powerdownAt.IsZero() && !m.obs.quitting && !m.rec.GuestOff &&
				m.rec.Phase != phaseDeleting && m.rec.Machine.GetSpec().GetPower() == mriv1alpha1.Power_POWER_ON {
				// Nobody asked QEMU to end: start it again, but not in a tight loop.
				m.obs.startErr = "QEMU ended unexpectedly: " + w.logTail()
				m.failedLocked()
				w.log.Info("QEMU ended unexpectedly", "pid", m.obs.pid, "retryIn", time.Until(m.obs.retryAt).Round(time.Second))
			}
			m.obs.quitting = false
			m.obs.pid, m.obs.connected, m.obs.runState = 0, false, ""
			m.obs.plugged, m.obs.unplugAt = nil, nil
			m.obs.powerdownAt, m.obs.pressedAt, m.obs.unreachableSince = time.Time{}, time.Time{}, time.Time{}
		})
		return
	}
	if err := w.connect(ctx); err != nil {
		w.update(func(m *machine) {
			m.obs.pid, m.obs.connected = w.proc.PID, false
			if m.obs.unreachableSince.IsZero() {
				m.obs.unreachableSince = time.Now()
			}
		})
	}
}

// connect opens the QMP connection of the running QEMU and reads its state and devices.
func (w *worker) connect(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := qmp.Dial(dctx, w.socket)
	if err != nil {
		return err
	}
	st, err := c.QueryStatus(dctx)
	if err != nil {
		c.Close()
		return err
	}
	var children []struct {
		Name string `json:"name"`
	}
	if err := c.Execute(dctx, "qom-list", map[string]string{"path": "/machine/peripheral"}, &children); err != nil {
		c.Close()
		return err
	}
	plugged := map[string]bool{}
	for _, ch := range children {
		plugged[ch.Name] = true
	}
	w.qmp = c
	w.update(func(m *machine) {
		m.obs.pid, m.obs.connected, m.obs.runState, m.obs.plugged = w.proc.PID, true, st.Status, plugged
		m.obs.unreachableSince = time.Time{}
		if m.rec.Phase == phaseCreating {
			m.rec.Phase = phaseCreated // started by a runtime that stopped before noting it
		}
		if m.obs.unplugAt == nil {
			m.obs.unplugAt = map[string]time.Time{}
		}
	})
	w.log.V(1).Info("QMP connected", "pid", w.proc.PID, "state", st.Status)
	return nil
}

func (w *worker) disconnect() {
	if w.qmp == nil {
		return
	}
	w.qmp.Close()
	w.qmp = nil
	w.update(func(m *machine) { m.obs.connected = false })
}

// command runs a QMP command that needs no answer; on failure the connection is dropped
// and the next pass looks again.
func (w *worker) command(ctx context.Context, name string, args any) bool {
	if w.qmp == nil {
		return false
	}
	qctx, cancel := context.WithTimeout(ctx, qmpTimeout)
	defer cancel()
	if err := w.qmp.Execute(qctx, name, args, nil); err != nil {
		w.log.Error(err, "QMP command failed", "command", name)
		w.disconnect()
		return false
	}
	return true
}

func (w *worker) onEvent(ctx context.Context, ev qmp.Event) {
	switch ev.Name {
	case "SHUTDOWN":
		var data struct {
			Guest  bool   `json:"guest"`
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(ev.Data, &data)
		w.log.Info("QEMU shutting down", "guest", data.Guest, "reason", data.Reason)
		w.update(func(m *machine) {
			// The guest turned itself off while it should run, and not because the
			// runtime pressed its power button: it stays off (CONTRACT.md S2 Shutdown).
			if data.Guest && data.Reason == "guest-shutdown" && m.obs.powerdownAt.IsZero() &&
				m.rec.Phase != phaseDeleting && m.rec.Machine.GetSpec().GetPower() == mriv1alpha1.Power_POWER_ON {
				m.rec.GuestOff = true
			}
		})
	case "DEVICE_DELETED":
		var data struct {
			Device string `json:"device"`
		}
		_ = json.Unmarshal(ev.Data, &data)
		if data.Device == "" {
			return // a device's inner part, such as its virtio backend
		}
		w.update(func(m *machine) {
			delete(m.obs.plugged, data.Device)
			delete(m.obs.unplugAt, data.Device)
			m.obs.noPort = false
		})
		w.releaseBackend(ctx, data.Device)
	}
}

// releaseBackend removes the block node or netdev left behind by an unplugged device.
func (w *worker) releaseBackend(ctx context.Context, qemuID string) {
	w.r.mu.Lock()
	d := w.m.rec.device(qemuID)
	w.r.mu.Unlock()
	if d == nil || w.qmp == nil {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, qmpTimeout)
	defer cancel()
	var err error
	if d.Kind == kindVolume {
		err = w.qmp.Execute(qctx, "blockdev-del", map[string]string{"node-name": qemuID}, nil)
	} else {
		err = w.qmp.Execute(qctx, "netdev_del", map[string]string{"id": qemuID}, nil)
	}
	if err != nil {
		w.log.V(1).Info("backend of an unplugged device not removed", "device", qemuID, "error", err)
	}
}
