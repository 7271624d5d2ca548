package qemu

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protojson"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// The state directory:
//
//	<state>/machines/<id>/           one machine (see the file names below)
//	<state>/machines/.new-<id>/      a machine being created: renamed to <id> once its
//	                                 record is written, so every <id> folder has one
//	<state>/machines/.deleted-<id>/  a machine whose QEMU is gone, being removed
//	<state>/volumes/<handle>         disks named by handle, which outlive machines
const (
	machinesDir   = "machines"
	volumesDir    = "volumes"
	newPrefix     = ".new-"
	deletedPrefix = ".deleted-"

	recordFile = "machine.json"
	// ConsoleLogFile is the console log's name in a machine's folder (MachineDir).
	ConsoleLogFile = "console.log"
	// ConsoleSocketFile is the console's interactive socket (docs/console.md). Its name is
	// no longer than qmp.sock's: socket paths are limited to 107 bytes, and console.sock
	// made the runtime refuse state directories QMP's socket fitted in (make demo in a clone
	// under /tmp/anvil-fresh.XXXXXX/anvil).
	ConsoleSocketFile = "tty.sock"
	qemuLogFile       = "qemu.log"
	qmpFile           = "qmp.sock"
	pidFile           = "qemu.pid"
	ignFile           = "ignition.json"
	seedFile          = "seed.iso"
	metaFile          = "meta-data"
	disksDir          = "disks"
)

// MachineDir is the folder the runtime keeps machine id's files in, under its state
// directory (docs/qemu-runtime.md): also for the host's admin and tests on the pool's host.
func MachineDir(state, id string) string { return filepath.Join(state, machinesDir, id) }

// ConsoleLogPath is machine id's console log on the pool's host. Tenants read it through
// the console API (docs/console.md); the Machine's status does not say where it is.
func ConsoleLogPath(state, id string) string {
	return filepath.Join(MachineDir(state, id), ConsoleLogFile)
}

func qmpSocketPath(state, id string) string { return filepath.Join(MachineDir(state, id), qmpFile) }

func consoleSocketPath(state, id string) string {
	return filepath.Join(MachineDir(state, id), ConsoleSocketFile)
}

// phase is where a machine is in its life, as far as files go.
type phase string

const (
	// phaseCreating: the record exists; the image, disks or the first boot are not done.
	phaseCreating phase = "Creating"
	// phaseCreated: QEMU has started at least once from the machine's files.
	phaseCreated phase = "Created"
	// phaseDeleting: deletion has started; on restart it is finished.
	phaseDeleting phase = "Deleting"
)

// record is what a machine keeps in machine.json: the MRI machine (metadata, spec, status)
// and what the runtime needs to carry on after a restart.
type record struct {
	Phase   phase                `json:"phase"`
	Machine *mriv1alpha1.Machine `json:"-"`
	// RebootWanted is the token of the last RebootMachine; status.reboot_token catches up.
	RebootWanted string `json:"rebootWanted,omitempty"`
	// Devices are the disks and NICs, of the spec or still being detached.
	Devices    []*device `json:"devices,omitempty"`
	NextDevice int       `json:"nextDevice"`
	// RootPorts is how many PCIe root ports the running QEMU was started with.
	RootPorts int `json:"rootPorts,omitempty"`
	// SSHPort is the host port forwarded to the first NIC's port 22.
	SSHPort int `json:"sshPort,omitempty"`
	// Boot is the pulled image's files (inside the cache).
	Boot *osimage.Files `json:"boot,omitempty"`
	// GuestOff says the guest powered itself off: the machine stays Shutdown until its
	// power is set Off and On again.
	GuestOff bool `json:"guestOff,omitempty"`
	// Reimaging: ReimageMachine changed the spec's image; QEMU is stopped and what the old
	// image made (the root disk, the first-boot files, the pulled files) is dropped before
	// the usual steps pull, prepare and start the new one.
	Reimaging bool `json:"reimaging,omitempty"`
	// Failure, when set, says why the machine can never run (Terminated).
	Failure *failure `json:"failure,omitempty"`
}

// failure is a reason the machine cannot run.
type failure struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// deviceKind tells disks from NICs.
type deviceKind string

const (
	kindVolume deviceKind = "volume"
	kindNIC    deviceKind = "nic"
)

// device is one volume or NIC as QEMU knows it. A detached name that is attached again
// gets a new device (and QEMU id), so an unplug still in progress never collides.
type device struct {
	Kind deviceKind `json:"kind"`
	Name string     `json:"name"`
	// QEMUID names the device and its block node or netdev in QEMU.
	QEMUID string `json:"qemuID"`
	// Detached: the name has left the spec; the device goes once unplugged and cleaned.
	Detached bool `json:"detached,omitempty"`
	// Port is the root port the device sits on in the running QEMU (-1: none).
	Port int `json:"port"`

	// Volumes.
	Path   string `json:"path,omitempty"`
	Format string `json:"format,omitempty"`
	// Owned disks are the machine's own files, removed when it is detached or deleted.
	Owned bool `json:"owned,omitempty"`
	// Ready: the disk file exists.
	Ready bool `json:"ready,omitempty"`

	// NICs.
	MAC string `json:"mac,omitempty"`
	// Network is the NIC's network: one the pool configures (Config.Networks) restricts it.
	Network string `json:"network,omitempty"`
	// SSHPort is the host port forwarded to this NIC's port 22 in the running QEMU.
	SSHPort int `json:"sshPort,omitempty"`
	// IP is the address a segment's switch gives a NIC on a segment network (see Segment),
	// and Segment the switch's name of its segment, both kept for the machine's life from
	// its first join: a label changed later never moves the NIC to another segment.
	IP      string `json:"ip,omitempty"`
	Segment string `json:"segment,omitempty"`
}

type recordJSON struct {
	*recordAlias
	Machine json.RawMessage `json:"machine"`
}

type recordAlias record

func (r *record) MarshalJSON() ([]byte, error) {
	m, err := protojson.Marshal(r.Machine)
	if err != nil {
		return nil, err
	}
	return json.Marshal(recordJSON{recordAlias: (*recordAlias)(r), Machine: m})
}

func (r *record) UnmarshalJSON(raw []byte) error {
	aux := recordJSON{recordAlias: (*recordAlias)(r)}
	if err := json.Unmarshal(raw, &aux); err != nil {
		return err
	}
	r.Machine = &mriv1alpha1.Machine{}
	return protojson.Unmarshal(aux.Machine, r.Machine)
}

// writeRecord writes a marshalled record into dir/machine.json through a synced
// temporary file and a rename, so a crash leaves either the old record or the new one.
func writeRecord(dir string, raw []byte) error {
	tmp := filepath.Join(dir, recordFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(raw); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, recordFile))
}

func readRecord(dir string) (*record, error) {
	raw, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return nil, err
	}
	rec := &record{}
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, recordFile), err)
	}
	if rec.Machine.GetMetadata().GetId() != filepath.Base(dir) {
		return nil, fmt.Errorf("%s: the record is of machine %q", dir, rec.Machine.GetMetadata().GetId())
	}
	return rec, nil
}
