package qemu

import (
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Condition types the runtime reports.
const (
	CondImagePulled  = "ImagePulled"
	CondDisksReady   = "DisksReady"
	CondStarted      = "Started"
	CondDevices      = "DevicesSettled"
	CondGuestPowered = "GuestPoweredOff"
)

// observeStatus rewrites the machine's status from its record and what was observed.
// observed_generation moves to the generation only once the machine is in the state
// its spec asks for (CONTRACT.md S1).
func observeStatus(rec *record, obs *observed, dir string, now time.Time) {
	m := rec.Machine
	st := m.Status
	if st == nil {
		st = &mriv1alpha1.MachineStatus{}
		m.Status = st
	}
	st.Architecture = m.GetSpec().GetArchitecture()
	st.Console = filepath.Join(dir, ConsoleLogFile)
	if !obs.seen {
		return
	}
	st.State = state(rec, obs)
	st.Volumes, st.NetworkInterfaces = attachments(rec, obs)
	st.Addresses = addresses(rec, obs)
	st.Conditions = conditions(rec, obs, now)
	if settled(rec, obs) {
		st.ObservedGeneration = m.GetMetadata().GetGeneration()
	}
}

func running(obs *observed) bool { return obs.pid != 0 && obs.connected && obs.runState == "running" }

func state(rec *record, obs *observed) mriv1alpha1.MachineState {
	switch {
	case rec.Phase == phaseDeleting:
		return mriv1alpha1.MachineState_MACHINE_STATE_TERMINATING
	case rec.Failure != nil:
		return mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED
	case obs.pid != 0 && obs.connected:
		return mriv1alpha1.MachineState_MACHINE_STATE_RUNNING
	case obs.pid != 0:
		// Not reachable yet: keep what was last reported rather than guess.
		if s := rec.Machine.GetStatus().GetState(); s != mriv1alpha1.MachineState_MACHINE_STATE_UNSPECIFIED {
			return s
		}
		return mriv1alpha1.MachineState_MACHINE_STATE_PENDING
	case rec.Phase == phaseCreated:
		return mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN
	case rec.Boot != nil && rec.Machine.GetSpec().GetPower() == mriv1alpha1.Power_POWER_OFF:
		return mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN // never started, as asked
	}
	return mriv1alpha1.MachineState_MACHINE_STATE_PENDING
}

// settled reports whether the machine is what its spec (at this generation) asks for.
func settled(rec *record, obs *observed) bool {
	if rec.Phase == phaseDeleting {
		return false
	}
	if rec.Failure != nil {
		return obs.pid == 0
	}
	if rec.Reimaging || rec.Boot == nil || rec.RebootWanted != rec.Machine.GetStatus().GetRebootToken() {
		return false
	}
	on := rec.Machine.GetSpec().GetPower() == mriv1alpha1.Power_POWER_ON && !rec.GuestOff
	for _, d := range rec.Devices {
		if d.Detached {
			return false
		}
		if !d.Ready || on && !obs.plugged[d.QEMUID] {
			return false
		}
	}
	if on {
		return running(obs)
	}
	return obs.pid == 0
}

// attachments lists every device of the spec, and detached ones QEMU still holds.
func attachments(rec *record, obs *observed) (vols, nics []*mriv1alpha1.AttachmentStatus) {
	alive := obs.pid != 0 && obs.connected
	active := map[string]bool{}
	for _, d := range rec.Devices {
		if !d.Detached {
			active[string(d.Kind)+"/"+d.Name] = true
		}
	}
	for _, d := range rec.Devices {
		if d.Detached && (active[string(d.Kind)+"/"+d.Name] || !obs.plugged[d.QEMUID]) {
			continue
		}
		attached := d.Ready && (!alive || obs.plugged[d.QEMUID])
		if d.Detached {
			attached = true // still in the guest until it lets go
		}
		a := &mriv1alpha1.AttachmentStatus{Name: d.Name, State: mriv1alpha1.AttachState_ATTACH_STATE_PENDING}
		if attached {
			a.State = mriv1alpha1.AttachState_ATTACH_STATE_ATTACHED
		}
		if d.Kind == kindVolume {
			a.Handle = d.Path
			vols = append(vols, a)
		} else {
			a.Handle = d.MAC
			nics = append(nics, a)
		}
	}
	return vols, nics
}

// addresses: a segment's switch gives each of the guest's NICs there its own address;
// QEMU's user-mode network gives the guest 10.0.2.15 behind NAT; the first user-network
// NIC's SSH port is forwarded from 127.0.0.1 on the host.
func addresses(rec *record, obs *observed) []*mriv1alpha1.Address {
	var out []*mriv1alpha1.Address
	if h := rec.Machine.GetSpec().GetHostname(); h != "" {
		out = append(out, &mriv1alpha1.Address{Type: "Hostname", Address: h})
	}
	if obs.pid == 0 || !obs.connected {
		return out
	}
	// A segment's address first: unlike the user network's, it is the VM's own.
	for _, d := range rec.Devices {
		if d.Kind == kindNIC && !d.Detached && d.IP != "" && obs.plugged[d.QEMUID] {
			out = append(out, &mriv1alpha1.Address{Type: "InternalIP", Address: d.IP})
		}
	}
	for _, d := range rec.Devices {
		if d.Kind == kindNIC && !d.Detached && d.IP == "" && obs.plugged[d.QEMUID] {
			out = append(out, &mriv1alpha1.Address{Type: "InternalIP", Address: vm.GuestAddress})
			break
		}
	}
	for _, d := range rec.Devices {
		if d.Kind == kindNIC && d.SSHPort != 0 && obs.plugged[d.QEMUID] {
			out = append(out, &mriv1alpha1.Address{Type: "SSH", Address: "127.0.0.1:" + strconv.Itoa(d.SSHPort)})
		}
	}
	return out
}

func conditions(rec *record, obs *observed, now time.Time) []*mriv1alpha1.Condition {
	var out []*mriv1alpha1.Condition
	cond := func(t string, ok bool, reason, msg string) {
		out = append(out, &mriv1alpha1.Condition{Type: t, Status: ok, Reason: reason, Message: msg})
	}
	switch {
	case rec.Boot != nil:
		cond(CondImagePulled, true, "Pulled", "the image's files are in the cache")
	case rec.Failure != nil:
		cond(CondImagePulled, false, rec.Failure.Reason, rec.Failure.Message)
	case obs.pullErr != "":
		cond(CondImagePulled, false, "PullFailed", obs.pullErr+" (retrying)")
	default:
		cond(CondImagePulled, false, "Pulling", "pulling "+rec.Machine.GetSpec().GetImage().GetReference())
	}
	if rec.Boot == nil {
		return out
	}
	ready := true
	for _, d := range rec.Devices {
		ready = ready && (d.Detached || d.Ready)
	}
	switch {
	case ready:
		cond(CondDisksReady, true, "Ready", "every disk file exists")
	case obs.prepErr != "":
		cond(CondDisksReady, false, "PrepareFailed", obs.prepErr+" (retrying)")
	default:
		cond(CondDisksReady, false, "Creating", "creating disk files")
	}
	switch {
	case obs.pid != 0 && obs.connected:
		cond(CondStarted, true, "Running", fmt.Sprintf("QEMU runs as pid %d (%s)", obs.pid, obs.runState))
	case obs.pid != 0:
		cond(CondStarted, true, "Unreachable", fmt.Sprintf("QEMU runs as pid %d but its QMP socket does not answer yet", obs.pid))
	case obs.startErr != "":
		cond(CondStarted, false, "StartFailed", obs.startErr)
	default:
		cond(CondStarted, false, "NotRunning", "no QEMU runs for this machine")
	}
	ok, reason, msg := devicesCondition(rec, obs, now)
	cond(CondDevices, ok, reason, msg)
	if rec.GuestOff {
		cond(CondGuestPowered, true, "GuestPoweredOff", "the guest powered itself off; set power Off, then On, to start it again")
	}
	if reason, ok := stoppedStates[obs.runState]; ok && obs.pid != 0 && obs.connected {
		cond(computev1alpha1.ConditionGuestStopped, true, reason, fmt.Sprintf(
			"QEMU (pid %d) holds the guest stopped in state %s: it runs nothing (qemu.log says why; under --accel kvm, a host whose KVM stops guests needs --accel tcg). Power it off and on, or delete it",
			obs.pid, obs.runState))
	}
	return out
}

// stoppedStates are QEMU's run states (query-status) of a guest stopped on an error it
// does not leave by itself, with the reason GuestStopped reports for each.
var stoppedStates = map[string]string{
	"internal-error": "InternalError", // KVM (or TCG) could not go on: "KVM internal error" in qemu.log
	"io-error":       "IOError",       // a disk's write failed with werror=stop
	"guest-panicked": "GuestPanicked", // the guest's pvpanic device said so
}

func devicesCondition(rec *record, obs *observed, now time.Time) (bool, string, string) {
	for _, d := range rec.Devices {
		if sent, ok := obs.unplugAt[d.QEMUID]; ok && d.Detached && obs.plugged[d.QEMUID] && now.Sub(sent) >= detachPatience {
			return false, "DetachPending", fmt.Sprintf("the guest has not released %s %s since QEMU asked it to %s ago; it stays attached until the guest lets go", d.Kind, d.Name, now.Sub(sent).Round(time.Second))
		}
	}
	if obs.plugErr != "" {
		return false, "PlugFailed", "QEMU refused " + obs.plugErr + " (retrying)"
	}
	if obs.noPort {
		return false, "NoFreePort", "every PCIe root port of the running VM is taken: the device is plugged at the next power on"
	}
	return true, "Settled", "the VM's devices match the spec"
}
