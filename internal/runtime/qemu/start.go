package qemu

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/nocloud"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

const (
	// sparePorts are the root ports left free at start for hotplug.
	sparePorts = 4
	// startTimeout bounds the wait for a new QEMU's QMP socket.
	startTimeout = 30 * time.Second
)

// start launches QEMU from the machine's files and connects to it.
func (w *worker) start(ctx context.Context) {
	// A guest that boots afresh after a reboot was asked has rebooted: a reset right after
	// the start would only boot it twice (a remediation's reboot of a hung QEMU, which the
	// runtime had to stop, comes here).
	w.r.mu.Lock()
	rebooted := w.m.rec.RebootWanted
	w.r.mu.Unlock()
	spec, program, err := w.plan()
	if err == nil {
		err = w.writeFirstBoot()
	}
	var args []string
	if err == nil {
		args, err = vm.Args(spec)
	}
	if err != nil {
		w.startFailed(err)
		return
	}
	proc, err := vm.Launch(program, args, filepath.Join(w.dir, qemuLogFile))
	if err != nil {
		w.startFailed(err)
		return
	}
	w.proc = proc
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-proc.Exited():
			w.proc = nil
			w.startFailed(fmt.Errorf("QEMU exited at start: %s", w.logTail()))
			return
		case <-ctx.Done():
			return // the runtime is closing; the next one adopts this QEMU
		default:
		}
		if err := w.connect(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = proc.Kill(w.socket, 5*time.Second)
			w.proc = nil
			w.startFailed(fmt.Errorf("QEMU did not open its QMP socket within %s: %s", startTimeout, w.logTail()))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.update(func(m *machine) {
		m.rec.Phase = phaseCreated
		m.rec.Machine.Status.RebootToken = rebooted
		m.obs.startErr, m.obs.retryAt, m.obs.noPort, m.obs.startedAt = "", time.Time{}, false, time.Now()
		m.obs.powerdownAt, m.obs.pressedAt = time.Time{}, time.Time{}
	})
	w.log.Info("QEMU started", "pid", proc.PID)
}

func (w *worker) startFailed(err error) {
	w.log.Error(err, "QEMU not started")
	w.update(func(m *machine) {
		m.obs.startErr = err.Error()
		m.failedLocked()
		if strings.Contains(err.Error(), "host forwarding") {
			m.rec.SSHPort = 0 // taken meanwhile: the next start picks another
		}
	})
}

// plan assigns root ports and the SSH port, writes them to the record before QEMU starts
// (so a restarted runtime knows which ports a running QEMU uses), and returns the VM.
func (w *worker) plan() (vm.Spec, string, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	rec := w.m.rec
	spec := rec.Machine.Spec
	s := vm.Spec{
		Name: w.id, Architecture: w.r.archs[spec.Architecture], Accel: w.r.cfg.Accel,
		CPUs: int((spec.Resources.MilliCpu + 999) / 1000), MemoryMiB: (spec.Resources.MemoryBytes + 1<<20 - 1) >> 20,
		Kernel: rec.Boot.Kernel, Initramfs: rec.Boot.Initramfs, KernelCommandLine: rec.Boot.KernelCommandLine,
		QMPSocket: w.socket, ConsoleLog: filepath.Join(w.dir, ConsoleLogFile),
		ConsoleSocket: filepath.Join(w.dir, ConsoleSocketFile), PIDFile: filepath.Join(w.dir, pidFile),
		RunAs: w.r.cfg.runAs.RunAs(),
	}
	switch fb := spec.GetFirstBoot(); {
	case fb.GetFormat() == mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION:
		s.Ignition = filepath.Join(w.dir, ignFile)
		if hasMetaData(fb) {
			s.MetaData = filepath.Join(w.dir, metaFile)
		}
	case fb.GetFormat() == mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT || hasMetaData(fb):
		s.Seed = filepath.Join(w.dir, seedFile)
	}
	port, firstNIC := 0, true
	for _, d := range rec.Devices {
		d.Port, d.SSHPort = -1, 0
		if d.Detached || !d.Ready {
			continue // released or made later, then plugged
		}
		d.Port = port
		port++
		switch d.Kind {
		case kindVolume:
			s.Disks = append(s.Disks, vm.Disk{ID: d.QEMUID, Path: d.Path, Format: vm.DiskFormat(d.Format), Port: d.Port})
		case kindNIC:
			segment, err := w.r.joinSegmentLocked(w.id, rec, d)
			if err != nil {
				return vm.Spec{}, "", err
			}
			nic := w.r.vmNIC(w.id, d, d.Port, segment)
			if firstNIC && segment == nil {
				if rec.SSHPort == 0 || !portFree(rec.SSHPort) {
					p, err := vm.FreeLoopbackPort()
					if err != nil {
						return vm.Spec{}, "", err
					}
					rec.SSHPort = p
				}
				nic.SSHPort, d.SSHPort, firstNIC = rec.SSHPort, rec.SSHPort, false
			}
			s.NICs = append(s.NICs, nic)
		}
	}
	s.RootPorts = port + sparePorts
	rec.RootPorts = s.RootPorts
	if err := w.r.commitLocked(w.id, w.m); err != nil {
		return vm.Spec{}, "", err
	}
	return s, w.r.cfg.programs[s.Architecture], nil
}

// writeFirstBoot writes the Ignition file (and beside it the metadata file fw_cfg hands
// over), or the NoCloud seed, once: they carry the config of the first boot and stay the
// same until a reimage. A machine with metadata and no config gets a seed with empty
// user-data, so its metadata still reaches the guest.
func (w *worker) writeFirstBoot() error {
	w.r.mu.Lock()
	fb := w.m.rec.Machine.Spec.GetFirstBoot()
	hostname := w.m.rec.Machine.Spec.GetHostname()
	nics := w.m.rec.nics()
	network := w.r.networkConfigLocked(w.m.rec)
	w.r.mu.Unlock()
	if hostname == "" {
		hostname = w.id
	}
	md, err := firstBootMetaData(fb, nics)
	if err != nil {
		return err
	}
	meta := nocloud.MetaData(w.id, hostname, md)
	switch {
	case fb.GetFormat() == mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION:
		if hasMetaData(fb) {
			if err := writeOnce(filepath.Join(w.dir, metaFile), func(tmp string) error { return os.WriteFile(tmp, meta, 0o600) }); err != nil {
				return err
			}
		}
		return writeOnce(filepath.Join(w.dir, ignFile), func(tmp string) error { return os.WriteFile(tmp, fb.GetData(), 0o600) })
	case fb.GetFormat() == mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT || hasMetaData(fb):
		seed := nocloud.Seed{UserData: userData(fb), MetaData: meta, NetworkConfig: network}
		return writeOnce(filepath.Join(w.dir, seedFile), func(tmp string) error { return w.r.cfg.Seeds(tmp, seed) })
	}
	return nil
}

// userData is the seed's user-data: the cloud-init config, or nothing for a machine that
// has only metadata.
func userData(fb *mriv1alpha1.FirstBootConfig) []byte {
	if fb.GetFormat() == mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT {
		return fb.GetData()
	}
	return nil
}

// writeOnce makes path through write(tmp) and a rename, unless it exists.
func writeOnce(path string, write func(tmp string) error) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if err := write(tmp); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	return os.Rename(tmp, path)
}

// logTail is the end of QEMU's log since its last start, for conditions.
func (w *worker) logTail() string {
	raw, err := os.ReadFile(filepath.Join(w.dir, qemuLogFile))
	if err != nil {
		return "no QEMU log"
	}
	if i := bytes.LastIndex(raw, []byte("\n--- ")); i >= 0 {
		raw = raw[i+1:]
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) > 1 {
		lines = lines[1:] // the command line
	}
	if len(lines) > 6 {
		lines = lines[len(lines)-6:]
	}
	return strings.Join(lines, "; ")
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
