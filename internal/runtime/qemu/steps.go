package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// blankDiskSize is the size of an image_disk volume of size 0 when the image has no disk.
const blankDiskSize = 1 << 30

// backoff is the wait after the n-th failure in a row: 1 s doubling to a minute.
func backoff(n int) time.Duration {
	d := time.Second << min(n, 6)
	return min(d, time.Minute)
}

// failedLocked records a failure of a pull, preparation or start for backoff.
func (m *machine) failedLocked() {
	m.obs.failures++
	m.obs.retryAt = time.Now().Add(backoff(m.obs.failures - 1))
}

// startPull pulls the image in the background: pulls are long (CONTRACT.md R4) and a
// delete cancels them.
func (w *worker) startPull() {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	m := w.m
	if m.obs.pulling {
		return
	}
	img := proto.Clone(m.rec.Machine.Spec.Image).(*mriv1alpha1.Image)
	arch := w.r.archs[m.rec.Machine.Spec.Architecture]
	ctx, cancel := context.WithCancel(w.r.ctx)
	m.obs.pulling, m.cancelPull = true, cancel
	w.commitLocked()
	go func() {
		start := time.Now()
		files, err := w.r.cfg.Images.Pull(ctx, img.Reference, img.Digest, arch)
		cancel()
		w.r.mu.Lock()
		defer w.r.mu.Unlock()
		m.obs.pulling, m.cancelPull = false, nil
		if w.r.closed {
			return
		}
		if !proto.Equal(img, m.rec.Machine.Spec.Image) {
			// A reimage changed the image while it was pulled: what came is not wanted.
			pokeLocked(m)
			return
		}
		switch {
		case errors.Is(err, osimage.ErrWrongArchitecture):
			m.rec.Failure = &failure{Reason: "WrongArchitecture", Message: err.Error()}
		case errors.Is(err, osimage.ErrImageNotFound):
			m.rec.Failure = &failure{Reason: "ImageNotFound", Message: err.Error()}
		case errors.Is(err, osimage.ErrUnsafeDisk):
			m.rec.Failure = &failure{Reason: "UnsafeImage", Message: err.Error()}
		case errors.As(err, new(*registrynet.RefusedError)):
			// The pool's allow-list is its configuration: pulling again cannot help.
			m.rec.Failure = &failure{Reason: "RegistryRefused", Message: err.Error()}
		case errors.Is(err, osimage.ErrTooLarge):
			m.rec.Failure = &failure{Reason: "ImageTooLarge", Message: err.Error()}
		case errors.Is(err, osimage.ErrNotOSImage):
			// Content does not change under a digest: pulling again cannot help.
			m.rec.Failure = &failure{Reason: "NotOSImage", Message: err.Error()}
		case err != nil:
			m.obs.pullErr = err.Error()
			m.failedLocked()
		case files.Kernel == "":
			m.rec.Failure = &failure{Reason: "NoKernel", Message: "the image has no kernel; booting from a disk alone is not supported yet"}
		default:
			m.rec.Boot = &files
			m.obs.pullErr, m.obs.failures, m.obs.retryAt = "", 0, time.Time{}
			w.log.Info("image pulled", "image", img.Reference, "duration", time.Since(start).Round(time.Millisecond))
		}
		if err != nil && ctx.Err() == nil {
			w.log.Error(err, "pull failed", "image", img.Reference)
		}
		w.commitLocked()
		pokeLocked(m)
	}()
}

// prepare creates the disk file of a volume: an overlay on the image's disk, an empty
// disk, or the file of a handle (which must exist).
func (w *worker) prepare(ctx context.Context, qemuID string) {
	w.r.mu.Lock()
	d := w.m.rec.device(qemuID)
	v := w.m.rec.volume(d)
	if d == nil || v == nil || d.Detached {
		w.r.mu.Unlock()
		return
	}
	dev := *d
	vol := proto.Clone(v).(*mriv1alpha1.Volume)
	boot := *w.m.rec.Boot
	w.r.mu.Unlock()

	path, format, err := w.makeDisk(ctx, &dev, vol, boot)
	w.update(func(m *machine) {
		d := m.rec.device(qemuID)
		if d == nil {
			return
		}
		if err != nil {
			m.obs.prepErr = fmt.Sprintf("volume %s: %v", d.Name, err)
			m.failedLocked()
			return
		}
		d.Path, d.Format, d.Ready = path, string(format), true
		m.obs.prepErr, m.obs.failures, m.obs.retryAt = "", 0, time.Time{}
	})
}

func (w *worker) makeDisk(ctx context.Context, d *device, v *mriv1alpha1.Volume, boot osimage.Files) (string, vm.DiskFormat, error) {
	if h := v.GetHandle(); h != "" {
		path := handlePath(w.r.cfg.StateDir, h)
		if _, err := os.Stat(path); err != nil {
			return "", "", fmt.Errorf("no disk file %s for handle %q: %w", path, h, err)
		}
		format, err := handleFormat(path)
		return path, format, err
	}
	path := filepath.Join(w.dir, disksDir, d.QEMUID+".qcow2")
	if _, err := os.Stat(path); err == nil {
		return path, vm.FormatQCOW2, nil // made before a crash: complete, since it was renamed into place
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", "", err
	}
	var err error
	switch {
	case v.GetEmptyDisk() != nil:
		err = vm.CreateEmpty(ctx, path, v.GetEmptyDisk().GetSizeBytes())
	case boot.Disk != "":
		err = vm.CreateOverlay(ctx, path, boot.Disk, vm.DiskFormat(boot.DiskFormat), v.GetImageDisk().GetSizeBytes())
	default:
		// The image has no disk: the root disk starts blank.
		size := v.GetImageDisk().GetSizeBytes()
		if size == 0 {
			size = blankDiskSize
		}
		err = vm.CreateEmpty(ctx, path, size)
	}
	return path, vm.FormatQCOW2, err
}

// reset carries out the wanted reboot once: a running VM is reset; one that is off has
// nothing to reset.
func (w *worker) reset(ctx context.Context) {
	w.r.mu.Lock()
	wanted := w.m.rec.RebootWanted
	w.r.mu.Unlock()
	if w.qmp != nil && !w.command(ctx, "system_reset", nil) {
		return
	}
	w.update(func(m *machine) { m.rec.Machine.Status.RebootToken = wanted })
	w.log.Info("reset", "token", wanted)
}

// quit stops QEMU: the quit command when QMP answers, then SIGTERM and SIGKILL.
func (w *worker) quit(ctx context.Context) {
	w.update(func(m *machine) { m.obs.quitting = true })
	if w.qmp != nil {
		qctx, cancel := context.WithTimeout(ctx, qmpTimeout)
		if err := w.qmp.Quit(qctx); err != nil {
			w.log.Error(err, "QMP quit failed; signalling QEMU")
		}
		cancel()
	}
	if w.proc == nil {
		if p, ok := vm.Find(filepath.Join(w.dir, pidFile), w.socket); ok {
			w.proc = p
		}
	}
	if w.proc != nil {
		if err := w.proc.Kill(w.socket, 5*time.Second); err != nil {
			w.log.Error(err, "QEMU did not stop")
		}
	}
	w.disconnect()
	w.log.Info("QEMU stopped")
}

// teardown removes a deleted machine's folder once its QEMU is gone: the folder is
// renamed first, so a crash midway leaves a .deleted- folder the next start removes.
func (w *worker) teardown() (gone bool) {
	root := filepath.Join(w.r.cfg.StateDir, machinesDir)
	doomed := filepath.Join(root, deletedPrefix+w.id)
	if err := os.Rename(w.dir, doomed); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.log.Error(err, "machine folder not removed; retrying")
		w.update(func(m *machine) { m.failedLocked() })
		return false
	}
	if err := removeMachineFiles(doomed); err != nil {
		w.log.Error(err, "leftover files of a deleted machine; the next start removes them", "dir", doomed)
	}
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	m := w.m
	for _, d := range m.rec.Devices {
		w.r.leaveSegment(w.id, d)
	}
	delete(w.r.machines, w.id)
	if uid := m.rec.Machine.Metadata.Labels[mri.LabelMachineUID]; w.r.byUID[uid] == w.id {
		delete(w.r.byUID, uid)
	}
	w.r.events.Publish(mriv1alpha1.MachineEvent_TYPE_DELETED, m.rec.Machine)
	w.log.Info("machine deleted")
	return true
}
