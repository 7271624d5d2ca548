package qemu

import (
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// observed is what the runtime has seen of a machine's QEMU and files since it started;
// it is never persisted (a restarted runtime looks again).
type observed struct {
	// seen: the worker has looked at least once. Until then the status stays as it was
	// written before a restart, rather than describe an empty observation.
	seen bool
	// pid is the QEMU process of the machine, 0 when none runs.
	pid int
	// connected: the runtime holds the machine's QMP connection.
	connected bool
	// runState is QEMU's query-status answer (running, paused, ...).
	runState string
	// plugged holds the QEMU ids of the devices the running QEMU has.
	plugged map[string]bool
	// unplugAt is when device_del was sent, by QEMU id.
	unplugAt map[string]time.Time
	// powerdownAt is when the ACPI power button was first pressed (zero: it was not);
	// pressedAt when it was last pressed.
	powerdownAt, pressedAt time.Time
	// quitting: the runtime itself is stopping QEMU.
	quitting bool
	// unreachableSince is when a running QEMU first refused a QMP connection.
	unreachableSince time.Time

	pulling  bool
	pullErr  string
	startErr string
	prepErr  string
	noPort   bool
	// plugErr is QEMU's refusal of the last hotplug; plugRetryAt is when to try again.
	plugErr      string
	plugRetryAt  time.Time
	plugFailures int
	// startedAt is when this runtime last started QEMU: a QEMU that has run a while
	// clears the failure count.
	startedAt time.Time
	failures  int       // consecutive failed pulls, preparations or starts, for backoff
	retryAt   time.Time // no pull, preparation or start before this
	lastPlugs time.Time
}

// action is one thing to do to bring a machine closer to its spec.
type action string

const (
	actNone      action = ""          // settled, or waiting for an event
	actWait      action = "wait"      // nothing to do before step.at
	actPull      action = "pull"      // fetch the image's files into the cache
	actPrepare   action = "prepare"   // create a device's disk file
	actStart     action = "start"     // launch QEMU
	actResume    action = "resume"    // continue a paused VM
	actReset     action = "reset"     // carry out the wanted reboot
	actPlug      action = "plug"      // hotplug a device into the running VM
	actUnplug    action = "unplug"    // ask the guest to release a device
	actRelease   action = "release"   // forget a detached device and remove its files
	actPowerdown action = "powerdown" // press the ACPI power button
	actQuit      action = "quit"      // stop QEMU (quit, then signals)
	actTeardown  action = "teardown"  // remove the machine's folder: deletion's last step
	actReimage   action = "reimage"   // drop what the old image made, once QEMU is stopped
)

type step struct {
	action action
	dev    *device
	at     time.Time
}

// Timings of the decisions.
const (
	// unplugRetry is how often device_del is sent again while a guest holds a device: a
	// guest still booting misses the request.
	unplugRetry = 5 * time.Second
	// pressEvery is how often the power button is pressed again during the grace: a
	// guest still booting misses a press.
	pressEvery = 3 * time.Second
	// detachPatience is how long an unplug may take before a condition says the guest
	// has not released the device.
	detachPatience = 20 * time.Second
	// unreachablePatience is how long a QEMU may refuse QMP before it is stopped.
	unreachablePatience = 30 * time.Second
	// reconnectEvery is the wait between QMP connection attempts.
	reconnectEvery = time.Second
	// resetSettle is how long a QEMU this runtime started runs before it is reset.
	resetSettle = time.Second
)

// decide returns the next step for a machine: a pure function of its record, what has
// been observed, and the time.
func decide(rec *record, obs *observed, now time.Time, grace time.Duration) step {
	processRuns := obs.pid != 0
	if processRuns && !obs.connected {
		// A QEMU the runtime cannot talk to yet (starting, exiting, or its monitor busy):
		// never start a second one; stop it only when it stays unreachable.
		if rec.Phase == phaseDeleting || !obs.unreachableSince.IsZero() && now.Sub(obs.unreachableSince) > unreachablePatience {
			return step{action: actQuit}
		}
		return step{action: actWait, at: now.Add(reconnectEvery)}
	}
	if rec.Phase == phaseDeleting {
		if processRuns {
			return step{action: actQuit}
		}
		return step{action: actTeardown}
	}
	if rec.Failure != nil {
		if processRuns {
			return step{action: actQuit}
		}
		return step{}
	}
	if rec.Reimaging {
		switch {
		case processRuns:
			return decideStop(obs, now, grace)
		case obs.pulling:
			return step{} // the old image's pull, cancelled: it ends and pokes
		}
		return step{action: actReimage}
	}
	if rec.Boot == nil {
		switch {
		case obs.pulling:
			return step{}
		case now.Before(obs.retryAt):
			return step{action: actWait, at: obs.retryAt}
		}
		return step{action: actPull}
	}
	for _, d := range rec.Devices {
		if !d.Detached && !d.Ready {
			if now.Before(obs.retryAt) {
				return step{action: actWait, at: obs.retryAt}
			}
			return step{action: actPrepare, dev: d}
		}
	}
	wantOn := rec.Machine.GetSpec().GetPower() == mriv1alpha1.Power_POWER_ON && !rec.GuestOff
	if !wantOn {
		return decideOff(rec, obs, now, grace)
	}
	if !processRuns {
		if now.Before(obs.retryAt) {
			return step{action: actWait, at: obs.retryAt}
		}
		return step{action: actStart}
	}
	if obs.runState == "paused" {
		return step{action: actResume}
	}
	if rec.RebootWanted != rec.Machine.GetStatus().GetRebootToken() {
		// A reset in QEMU's first moments can leave the guest spinning before its
		// firmware ever runs (seen with TCG and a -kernel boot): wait until it has run a while.
		if settled := obs.startedAt.Add(resetSettle); now.Before(settled) {
			return step{action: actWait, at: settled}
		}
		return step{action: actReset}
	}
	return decideDevices(rec, obs, now)
}

// decideOff powers a machine off: the ACPI button first, quit once the grace is over.
func decideOff(rec *record, obs *observed, now time.Time, grace time.Duration) step {
	if obs.pid != 0 {
		return decideStop(obs, now, grace)
	}
	if rec.RebootWanted != rec.Machine.GetStatus().GetRebootToken() {
		return step{action: actReset} // nothing runs: the reboot is done by definition
	}
	for _, d := range rec.Devices {
		if d.Detached {
			return step{action: actRelease, dev: d}
		}
	}
	return step{}
}

// decideStop stops a running QEMU: the ACPI button, pressed again while the guest may
// still be booting, then quit once the grace is over.
func decideStop(obs *observed, now time.Time, grace time.Duration) step {
	if obs.powerdownAt.IsZero() {
		return step{action: actPowerdown}
	}
	deadline := obs.powerdownAt.Add(grace)
	if !now.Before(deadline) {
		return step{action: actQuit}
	}
	if next := obs.pressedAt.Add(pressEvery); now.Before(next) {
		return step{action: actWait, at: earliest(deadline, next)}
	}
	return step{action: actPowerdown}
}

// decideDevices plugs the spec's devices into a running VM and unplugs detached ones.
func decideDevices(rec *record, obs *observed, now time.Time) step {
	var wake time.Time
	for _, d := range rec.Devices {
		switch {
		case d.Detached && obs.plugged[d.QEMUID]:
			sent, ok := obs.unplugAt[d.QEMUID]
			if !ok || now.Sub(sent) >= unplugRetry {
				return step{action: actUnplug, dev: d}
			}
			wake = earliest(wake, sent.Add(unplugRetry))
			if patience := sent.Add(detachPatience); now.Before(patience) {
				wake = earliest(wake, patience) // the condition changes then
			}
		case d.Detached:
			return step{action: actRelease, dev: d}
		case !obs.plugged[d.QEMUID] && !obs.noPort:
			if now.Before(obs.plugRetryAt) {
				wake = earliest(wake, obs.plugRetryAt)
				continue
			}
			return step{action: actPlug, dev: d}
		}
	}
	if !wake.IsZero() {
		return step{action: actWait, at: wake}
	}
	return step{}
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
