package qemu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/mutate"
)

// ReimageMachine checks the new image as a create does, then records it: the worker stops
// QEMU, drops what the old image made and boots the new one (CONTRACT.md E8).
func (r *Runtime) ReimageMachine(ctx context.Context, req *mriv1alpha1.ReimageMachineRequest) (*mriv1alpha1.ReimageMachineResponse, error) {
	if err := mri.ValidateReimage(req); err != nil {
		return nil, err
	}
	if _, err := pinned(req.GetImage()); err != nil {
		return nil, mri.Invalidf("image: %v", err)
	}
	cur, err := r.clone(req.GetId())
	if err != nil {
		return nil, err
	}
	if next := proto.Clone(cur.Spec).(*mriv1alpha1.MachineSpec); !mutate.Reimage(next, req.GetImage(), req.GetFirstBoot()) {
		return &mriv1alpha1.ReimageMachineResponse{Machine: cur}, nil // as asked already (E3)
	}
	// The image is read outside the lock: a registry answers in seconds, not microseconds.
	if err := r.checkImage(ctx, req.GetImage(), r.archs[cur.Spec.GetArchitecture()]); err != nil {
		return nil, err
	}
	m, err := r.mutate(req.GetId(), func(m *machine) (bool, error) {
		if m.rec.Phase == phaseDeleting {
			return false, mri.Invalidf("machine %s is being deleted", req.GetId())
		}
		if err := checkHardwareRefs(req.GetFirstBoot().GetHardwareMetaData(), m.rec.nics()); err != nil {
			return false, err // the NICs it has now: some may have been attached or detached
		}
		if !mutate.Reimage(m.rec.Machine.Spec, req.GetImage(), req.GetFirstBoot()) {
			return false, nil
		}
		m.rec.Reimaging = true
		// A machine the old image failed (not found, unsafe) may run the new one.
		m.rec.Failure = nil
		if m.cancelPull != nil {
			m.cancelPull() // the old image's
		}
		m.obs.failures, m.obs.retryAt = 0, time.Time{}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.ReimageMachineResponse{Machine: m}, nil
}

// clone is a copy of machine id, or NOT_FOUND.
func (r *Runtime) clone(id string) (*mriv1alpha1.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, err := r.get(id)
	if err != nil {
		return nil, err
	}
	return proto.Clone(m.rec.Machine).(*mriv1alpha1.Machine), nil
}

// reimage drops, once QEMU is stopped, what the old image made: the root disk's file (an
// overlay on the old image's disk, or the blank disk it started with), the first-boot
// files (the new image's first boot reads the spec's config) and the pulled files. Each
// removal may be repeated, so a crash midway repeats the step; the usual steps then pull
// the new image, make the root disk anew and start QEMU if the spec's power is on.
func (w *worker) reimage() {
	w.r.mu.Lock()
	var roots []string
	for _, d := range w.m.rec.Devices {
		if v := w.m.rec.volume(d); v.GetImageDisk() != nil && d.Owned && !d.Detached {
			roots = append(roots, d.QEMUID)
		}
	}
	w.r.mu.Unlock()
	var errs []error
	for _, id := range roots {
		errs = append(errs, removeIfThere(filepath.Join(w.dir, disksDir, id+".qcow2")))
	}
	for _, f := range []string{ignFile, seedFile, metaFile} {
		errs = append(errs, removeIfThere(filepath.Join(w.dir, f)))
	}
	if err := errors.Join(errs...); err != nil {
		w.log.Error(err, "files of the old image not removed; retrying")
		w.update(func(m *machine) { m.failedLocked() })
		return
	}
	var image string
	w.update(func(m *machine) {
		for _, id := range roots {
			if d := m.rec.device(id); d != nil {
				d.Ready, d.Path, d.Format = false, "", ""
			}
		}
		m.rec.Boot, m.rec.Reimaging = nil, false
		image = m.rec.Machine.Spec.GetImage().GetReference()
	})
	w.log.Info("reimaging: the old image's root disk and first-boot files removed", "image", image)
}

func removeIfThere(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
