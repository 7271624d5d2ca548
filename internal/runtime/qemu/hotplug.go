package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/anvil-dev/anvil/internal/runtime/qemu/qmp"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// plug hotplugs a device of the spec into the running VM, on a free root port. The port is
// written to the record before QEMU hears of the device.
func (w *worker) plug(ctx context.Context, qemuID string) {
	w.r.mu.Lock()
	m := w.m
	d := m.rec.device(qemuID)
	if d == nil || w.qmp == nil {
		w.r.mu.Unlock()
		return
	}
	port := freeRootPort(m.rec, &m.obs)
	if port < 0 {
		m.obs.noPort = true
		w.commitLocked()
		w.r.mu.Unlock()
		return
	}
	d.Port, d.SSHPort = port, 0
	var segment *vm.SegmentSockets
	if d.Kind == kindNIC {
		var err error
		if segment, err = w.r.joinSegmentLocked(w.id, m.rec, d); err != nil {
			d.Port = -1
			m.obs.plugErr = "nic " + d.Name + ": " + err.Error()
			w.r.mu.Unlock()
			w.log.Error(err, "hotplug failed", "device", d.QEMUID)
			return
		}
	}
	w.commitLocked()
	dev := *d
	var backing *vm.Disk
	if boot := m.rec.Boot; m.rec.volume(d).GetImageDisk() != nil && boot != nil && boot.Disk != "" {
		backing = &vm.Disk{ID: dev.QEMUID + "base", Path: boot.Disk, Format: vm.DiskFormat(boot.DiskFormat), ReadOnly: true}
	}
	w.r.mu.Unlock()

	qctx, cancel := context.WithTimeout(ctx, qmpTimeout)
	defer cancel()
	var err error
	if dev.Kind == kindVolume {
		disk := vm.Disk{ID: dev.QEMUID, Path: dev.Path, Format: vm.DiskFormat(dev.Format), Port: port, Backing: backing}
		if err = w.plugDisk(qctx, disk); err == nil || duplicate(err) {
			if err = w.qmp.Execute(qctx, "device_add", vm.DiskDevice(disk), nil); err != nil && !duplicate(err) {
				_ = w.qmp.Execute(qctx, "blockdev-del", map[string]string{"node-name": dev.QEMUID}, nil)
			}
		}
	} else {
		nic := w.r.vmNIC(w.id, &dev, port, segment)
		if err = w.qmp.Execute(qctx, "netdev_add", vm.Netdev(nic), nil); err == nil || duplicate(err) {
			if err = w.qmp.Execute(qctx, "device_add", vm.NICDevice(nic), nil); err != nil && !duplicate(err) {
				_ = w.qmp.Execute(qctx, "netdev_del", map[string]string{"id": dev.QEMUID}, nil)
			}
		}
	}
	if err != nil && !duplicate(err) {
		w.log.Error(err, "hotplug failed", "device", dev.QEMUID)
		var qe *qmp.Error
		if !errors.As(err, &qe) {
			w.disconnect() // the connection broke: look again
			return
		}
		w.update(func(m *machine) {
			m.obs.plugErr = dev.Kind.String() + " " + dev.Name + ": " + qe.Desc
			m.obs.plugRetryAt = time.Now().Add(backoff(m.obs.plugFailures))
			m.obs.plugFailures++
		})
		return
	}
	w.update(func(m *machine) {
		m.obs.plugged[dev.QEMUID] = true
		m.obs.plugErr, m.obs.plugFailures = "", 0
	})
	w.log.Info("device plugged", "device", dev.QEMUID, "name", dev.Name, "port", port)
}

// plugDisk adds the block node of a disk plugged while QEMU runs. The runtime opens the
// files (the disk, and an image disk's backing file in the image cache) and hands QEMU the
// descriptors (fd sets): QEMU has dropped to its unprivileged user by then (-runas) and
// cannot open the runtime's files by path, nor should it.
func (w *worker) plugDisk(ctx context.Context, disk vm.Disk) error {
	var sets []int
	// The sets go once the node is added: QEMU keeps the copies the node uses.
	defer func() {
		for _, id := range sets {
			_ = w.qmp.Execute(ctx, "remove-fd", map[string]any{"fdset-id": id}, nil)
		}
	}()
	pass := func(d *vm.Disk, flag int) error {
		id, err := w.passFile(ctx, d.Path, flag, d.ID)
		if err != nil {
			return err
		}
		sets = append(sets, id)
		d.Path = fmt.Sprintf("/dev/fdset/%d", id)
		return nil
	}
	if err := pass(&disk, os.O_RDWR); err != nil {
		return err
	}
	if disk.Backing != nil {
		backing := *disk.Backing
		if err := pass(&backing, os.O_RDONLY); err != nil {
			return err
		}
		disk.Backing = &backing
	}
	return w.qmp.Execute(ctx, "blockdev-add", vm.Blockdev(disk), nil)
}

// passFile opens path and gives QEMU the descriptor in a new fd set, whose id it returns.
func (w *worker) passFile(ctx context.Context, path string, flag int, opaque string) (int, error) {
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		// Reported as a refusal, not a broken connection: the plug is retried later.
		return 0, &qmp.Error{Class: "GenericError", Desc: err.Error()}
	}
	defer f.Close()
	var set struct {
		FDSetID int `json:"fdset-id"`
	}
	err = w.qmp.ExecuteWithFile(ctx, "add-fd", map[string]any{"opaque": opaque}, &set, f)
	return set.FDSetID, err
}

// freeRootPort returns a root port of the running QEMU no plugged device uses, or -1.
func freeRootPort(rec *record, obs *observed) int {
	used := map[int]bool{}
	for _, d := range rec.Devices {
		if obs.plugged[d.QEMUID] && d.Port >= 0 {
			used[d.Port] = true
		}
	}
	for p := 0; p < rec.RootPorts; p++ {
		if !used[p] {
			return p
		}
	}
	return -1
}

// duplicate reports QEMU saying the node, netdev or device exists: an earlier attempt
// got that far.
func duplicate(err error) bool {
	var qe *qmp.Error
	return errors.As(err, &qe) && (strings.Contains(qe.Desc, "Duplicate") || strings.Contains(qe.Desc, "already exists"))
}

// unplug asks the guest to release a detached device (the PCIe attention button or the
// ACPI eject). QEMU confirms with DEVICE_DELETED once the guest has let go.
func (w *worker) unplug(ctx context.Context, qemuID string) {
	if w.qmp == nil {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, qmpTimeout)
	defer cancel()
	err := w.qmp.Execute(qctx, "device_del", map[string]string{"id": qemuID}, nil)
	var qe *qmp.Error
	switch {
	case err == nil, errors.As(err, &qe) && strings.Contains(qe.Desc, "in the process of unplug"):
		w.update(func(m *machine) { m.obs.unplugAt[qemuID] = time.Now() })
	case errors.As(err, &qe) && qe.Class == "DeviceNotFound":
		w.update(func(m *machine) { delete(m.obs.plugged, qemuID) })
	case errors.As(err, &qe):
		w.log.Error(err, "device_del refused", "device", qemuID)
		w.update(func(m *machine) { m.obs.unplugAt[qemuID] = time.Now() })
	default:
		w.disconnect()
	}
}

// release forgets a detached device that no QEMU holds, with its backend and own file.
func (w *worker) release(ctx context.Context, qemuID string) {
	w.r.mu.Lock()
	d := w.m.rec.device(qemuID)
	w.r.mu.Unlock()
	if d == nil {
		return
	}
	w.releaseBackend(ctx, qemuID)
	if d.Owned && d.Path != "" {
		if err := os.Remove(d.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.log.Error(err, "disk of a detached volume not removed", "path", d.Path)
			return
		}
	}
	w.update(func(m *machine) {
		if d := m.rec.device(qemuID); d != nil {
			w.r.leaveSegment(w.id, d)
			m.rec.remove(d)
		}
	})
	w.log.Info("device released", "device", qemuID, "name", d.Name)
}

func (k deviceKind) String() string { return string(k) }
