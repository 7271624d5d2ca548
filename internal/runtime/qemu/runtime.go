package qemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/events"
	"github.com/anvil-dev/anvil/internal/netswitch"
	"github.com/anvil-dev/anvil/internal/runtime/console"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Version of this runtime, reported by the Version call.
const Version = "0.1.0"

// Runtime is the qemu runtime. Create it with New; Close it to stop serving (VMs keep
// running).
type Runtime struct {
	mriv1alpha1.UnimplementedMachineRuntimeServer

	cfg      Config
	capacity *mriv1alpha1.Resources
	archs    map[mriv1alpha1.Architecture]computev1alpha1.Architecture

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	machines map[string]*machine
	byUID    map[string]string
	// events is published to under mu, so a new stream's machines and events line up.
	events *events.Hub
	closed bool
	// ownSwitch is the switch the runtime made itself (Config.Switch was nil), closed with it.
	ownSwitch *netswitch.Switch
	// consoles answers the console calls (console.go).
	consoles *console.Server
}

// machine is one machine in memory: its record (persisted) and what was observed.
type machine struct {
	rec *record
	obs observed
	// poke wakes the machine's worker.
	poke chan struct{}
	// cancelPull stops a pull in flight (on delete).
	cancelPull context.CancelFunc
	// written is the record as last written, to skip writes that change nothing.
	written []byte
}

// New opens the state directory, finishes what a crash interrupted, adopts the QEMU
// processes of its machines and starts driving each machine towards its spec.
func New(cfg Config) (*Runtime, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	cpu, mem, err := hostResources()
	if err != nil {
		return nil, fmt.Errorf("qemu runtime: reading the host's resources: %w", err)
	}
	r := &Runtime{
		cfg: cfg, capacity: scaled(cpu, mem, cfg.CPUOvercommit, cfg.MemoryOvercommit),
		archs:    map[mriv1alpha1.Architecture]computev1alpha1.Architecture{},
		machines: map[string]*machine{}, byUID: map[string]string{},
		events: events.NewHub(watchBuffer),
	}
	r.consoles = &console.Server{Lookup: r.lookupConsole}
	for _, a := range cfg.Architectures {
		r.archs[mri.ArchToMRI(a)] = a
	}
	for _, d := range []string{machinesDir, volumesDir} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, d), 0o700); err != nil {
			return nil, err
		}
	}
	if hasSegments(cfg.Networks) && cfg.Switch == nil {
		dir, err := SwitchDir(cfg.StateDir)
		if err != nil {
			return nil, fmt.Errorf("qemu runtime: %w", err)
		}
		sw, err := netswitch.New(dir, cfg.Logger.WithName("switch"), r.cfg.runAs.UIDs()...)
		if err != nil {
			return nil, fmt.Errorf("qemu runtime: %w", err)
		}
		r.cfg.Switch, r.ownSwitch = sw, sw
	}
	if err := r.load(); err != nil {
		r.closeSwitch()
		return nil, err
	}
	r.rejoinSegments()
	r.ctx, r.cancel = context.WithCancel(context.Background())
	for id, m := range r.machines {
		r.startWorker(id, m)
	}
	// When each console log grew, for since_seconds (console/times.go).
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		console.RecordTimes(r.ctx, time.Second, r.consoleLogs)
	}()
	return r, nil
}

// consoleLogs are the paths of every machine's console log.
func (r *Runtime) consoleLogs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.machines))
	for id := range r.machines {
		out = append(out, ConsoleLogPath(r.cfg.StateDir, id))
	}
	return out
}

// load reads every machine's record and removes what a crash left half made or half
// deleted (CONTRACT.md R2).
func (r *Runtime) load() error {
	root := filepath.Join(r.cfg.StateDir, machinesDir)
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() {
			continue
		}
		if strings.HasPrefix(e.Name(), newPrefix) || strings.HasPrefix(e.Name(), deletedPrefix) {
			// A create that never got its record in place, or a delete past its last
			// QEMU: neither is a machine any more.
			if err := removeMachineFiles(dir); err != nil {
				return err
			}
			r.cfg.Logger.Info("removed files of an interrupted create or delete", "dir", dir)
			continue
		}
		rec, err := readRecord(dir)
		if err != nil {
			// Records are replaced atomically, so this is damage from outside: keep the
			// files for a human rather than delete a VM's disks.
			r.cfg.Logger.Error(err, "machine folder skipped: unreadable record", "dir", dir)
			continue
		}
		id := rec.Machine.Metadata.Id
		r.machines[id] = &machine{rec: rec, poke: make(chan struct{}, 1)}
		if rec.Phase != phaseDeleting {
			r.byUID[rec.Machine.Metadata.Labels[mri.LabelMachineUID]] = id
		}
	}
	return nil
}

// removeMachineFiles stops any QEMU still serving the folder's QMP socket, then removes
// the folder.
func removeMachineFiles(dir string) error {
	socket := filepath.Join(dir, qmpFile)
	if p, ok := vm.Find(filepath.Join(dir, pidFile), socket); ok {
		if err := p.Kill(socket, 5*time.Second); err != nil {
			return err
		}
	}
	return os.RemoveAll(dir)
}

// Close stops the workers and event streams. QEMU processes keep running; a new Runtime
// on the same state directory adopts them.
func (r *Runtime) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.events.Close()
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	r.closeSwitch()
}

// closeSwitch closes the runtime's own switch: the VMs it leaves running lose their
// segments until the next start joins them again.
func (r *Runtime) closeSwitch() {
	if r.ownSwitch != nil {
		_ = r.ownSwitch.Close()
	}
}

func (r *Runtime) Version(context.Context, *mriv1alpha1.VersionRequest) (*mriv1alpha1.VersionResponse, error) {
	return &mriv1alpha1.VersionResponse{RuntimeName: r.cfg.Name, RuntimeVersion: Version, MriVersion: "v1alpha1", Pool: r.cfg.Name}, nil
}

// Status reports the host's resources times the overcommit ratios, as both capacity and
// allocatable: allocatable is never reduced by machines (the scheduler subtracts them).
func (r *Runtime) Status(context.Context, *mriv1alpha1.StatusRequest) (*mriv1alpha1.StatusResponse, error) {
	resp := &mriv1alpha1.StatusResponse{
		Capacity:    proto.Clone(r.capacity).(*mriv1alpha1.Resources),
		Allocatable: proto.Clone(r.capacity).(*mriv1alpha1.Resources),
	}
	for _, a := range r.cfg.Architectures {
		resp.Architectures = append(resp.Architectures, mri.ArchToMRI(a))
		if why := r.cfg.accel.Emulated(a); why == "" {
			resp.NativeArchitectures = append(resp.NativeArchitectures, mri.ArchToMRI(a))
		} else {
			resp.EmulationReasons = append(resp.EmulationReasons, &mriv1alpha1.EmulationReason{Architecture: mri.ArchToMRI(a), Reason: why})
		}
	}
	resp.Networks = poolNetworks(r.cfg.Networks)
	return resp, nil
}

func (r *Runtime) ListMachines(_ context.Context, req *mriv1alpha1.ListMachinesRequest) (*mriv1alpha1.ListMachinesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &mriv1alpha1.ListMachinesResponse{}
	for _, m := range r.machines {
		if mri.Lists(req, m.rec.Machine) {
			resp.Machines = append(resp.Machines, proto.Clone(m.rec.Machine).(*mriv1alpha1.Machine))
		}
	}
	return resp, nil
}

// get returns the machine or NOT_FOUND; mu must be held.
func (r *Runtime) get(id string) (*machine, error) {
	m, ok := r.machines[id]
	if !ok {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "machine %q not found", id)
	}
	return m, nil
}

// commitLocked recomputes the machine's status, writes its record, and tells watchers
// when the machine changed. mu must be held. The record is on disk before anyone hears
// of a change.
func (r *Runtime) commitLocked(id string, m *machine) error {
	before := proto.Clone(m.rec.Machine).(*mriv1alpha1.Machine)
	observeStatus(m.rec, &m.obs, MachineDir(r.cfg.StateDir, id), time.Now())
	raw, err := json.MarshalIndent(m.rec, "", "  ")
	if err != nil {
		return err
	}
	if !bytes.Equal(raw, m.written) {
		if err := writeRecord(MachineDir(r.cfg.StateDir, id), raw); err != nil {
			return fmt.Errorf("writing the record of machine %s: %w", id, err)
		}
		m.written = raw
	}
	if !proto.Equal(before, m.rec.Machine) {
		r.events.Publish(mriv1alpha1.MachineEvent_TYPE_MODIFIED, m.rec.Machine)
	}
	return nil
}

// pokeLocked wakes the machine's worker.
func pokeLocked(m *machine) {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// watchBuffer is how many events a stream may fall behind before it is dropped and its
// client reconnects for the full list.
const watchBuffer = 1024

// WatchEvents sends every machine, then every change, until the client goes away or the
// runtime closes.
func (r *Runtime) WatchEvents(_ *mriv1alpha1.WatchEventsRequest, stream mriv1alpha1.MachineRuntime_WatchEventsServer) error {
	r.mu.Lock()
	current := make([]*mriv1alpha1.Machine, 0, len(r.machines))
	for _, m := range r.machines {
		current = append(current, m.rec.Machine)
	}
	sub := r.events.Subscribe(current)
	r.mu.Unlock()
	return sub.Stream(stream)
}

var errClosed = errors.New("qemu runtime: closed")
