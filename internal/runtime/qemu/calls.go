package qemu

import (
	"context"
	"encoding/json"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/mutate"
)

// mutate runs change on machine id under the lock. When change reports a spec change, the
// generation goes up, the record is written, and the worker is woken. Every call is
// idempotent: a change already in place changes nothing (CONTRACT.md E3).
func (r *Runtime) mutate(id string, change func(m *machine) (bool, error)) (*mriv1alpha1.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
	m, err := r.get(id)
	if err != nil {
		return nil, err
	}
	backup, err := cloneRecord(m.rec)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "machine %s: %v", id, err)
	}
	changed, err := change(m)
	if err != nil {
		m.rec = backup
		return nil, err
	}
	if changed {
		m.rec.Machine.Metadata.Generation++
		if err := r.commitLocked(id, m); err != nil {
			m.rec = backup
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		pokeLocked(m)
	}
	return proto.Clone(m.rec.Machine).(*mriv1alpha1.Machine), nil
}

func cloneRecord(rec *record) (*record, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	out := &record{}
	return out, json.Unmarshal(raw, out)
}

// DeleteMachine marks the machine for deletion; its worker stops QEMU and removes its
// folder, after which the machine is gone (NOT_FOUND).
func (r *Runtime) DeleteMachine(_ context.Context, req *mriv1alpha1.DeleteMachineRequest) (*mriv1alpha1.DeleteMachineResponse, error) {
	_, err := r.mutate(req.GetId(), func(m *machine) (bool, error) {
		if m.rec.Phase == phaseDeleting {
			return false, nil
		}
		m.rec.Phase = phaseDeleting
		m.rec.Machine.Metadata.DeletedAtUnixNano = time.Now().UnixNano()
		if m.cancelPull != nil {
			m.cancelPull()
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.DeleteMachineResponse{}, nil
}

func (r *Runtime) UpdateMachinePower(_ context.Context, req *mriv1alpha1.UpdateMachinePowerRequest) (*mriv1alpha1.UpdateMachinePowerResponse, error) {
	if err := mutate.CheckPower(req.GetPower()); err != nil {
		return nil, err
	}
	m, err := r.mutate(req.GetId(), func(m *machine) (bool, error) {
		if !mutate.SetPower(m.rec.Machine.Spec, req.GetPower()) {
			return false, nil
		}
		m.rec.GuestOff = false // a new power intent overrides what the guest did
		m.obs.retryAt = time.Time{}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.UpdateMachinePowerResponse{Machine: m}, nil
}

// RebootMachine asks for one reset per token; status.reboot_token shows it was done.
func (r *Runtime) RebootMachine(_ context.Context, req *mriv1alpha1.RebootMachineRequest) (*mriv1alpha1.RebootMachineResponse, error) {
	if err := mutate.CheckRebootToken(req.GetToken()); err != nil {
		return nil, err
	}
	m, err := r.mutate(req.GetId(), func(m *machine) (bool, error) {
		if m.rec.RebootWanted == req.GetToken() {
			return false, nil
		}
		m.rec.RebootWanted = req.GetToken()
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.RebootMachineResponse{Machine: m}, nil
}

func (r *Runtime) UpdateMachineLabels(_ context.Context, req *mriv1alpha1.UpdateMachineLabelsRequest) (*mriv1alpha1.UpdateMachineLabelsResponse, error) {
	m, err := r.mutate(req.GetId(), func(m *machine) (bool, error) {
		return mutate.SetLabels(m.rec.Machine.Metadata, req.GetLabels()), nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.UpdateMachineLabelsResponse{Machine: m}, nil
}

func (r *Runtime) AttachVolume(_ context.Context, req *mriv1alpha1.AttachVolumeRequest) (*mriv1alpha1.AttachVolumeResponse, error) {
	v := req.GetVolume()
	if err := validateVolume(v); err != nil {
		return nil, err
	}
	m, err := r.mutate(req.GetId(), func(m *machine) (bool, error) {
		changed, err := mutate.AttachVolume(m.rec.Machine.Spec, v)
		if changed {
			m.rec.addVolume(v)
		}
		return changed, err
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.AttachVolumeResponse{Machine: m}, nil
}

func (r *Runtime) DetachVolume(_ context.Context, req *mriv1alpha1.DetachVolumeRequest) (*mriv1alpha1.DetachVolumeResponse, error) {
	m, err := r.mutate(req.GetId(), func(m *machine) (bool, error) {
		if !mutate.DetachVolume(m.rec.Machine.Spec, req.GetName()) {
			return false, nil
		}
		m.rec.detach(kindVolume, req.GetName())
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.DetachVolumeResponse{Machine: m}, nil
}

func (r *Runtime) AttachNetworkInterface(_ context.Context, req *mriv1alpha1.AttachNetworkInterfaceRequest) (*mriv1alpha1.AttachNetworkInterfaceResponse, error) {
	n := req.GetNetworkInterface()
	if err := mri.ValidateNetworkInterface(n); err != nil {
		return nil, err
	}
	m, err := r.mutate(req.GetId(), func(m *machine) (bool, error) {
		if r.cfg.Networks[n.GetNetwork()].Segment != nil {
			// QEMU, dropped to its own user, cannot bind a new card's socket in the
			// machine's folder.
			return false, mri.Invalidf("network interface %s: network %s is a segment; give a machine its NICs there when it is created", n.GetName(), n.GetNetwork())
		}
		changed, err := mutate.AttachNetworkInterface(m.rec.Machine.Spec, n)
		if changed {
			m.rec.addNIC(m.rec.Machine.Metadata.Id, n)
		}
		return changed, err
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.AttachNetworkInterfaceResponse{Machine: m}, nil
}

func (r *Runtime) DetachNetworkInterface(_ context.Context, req *mriv1alpha1.DetachNetworkInterfaceRequest) (*mriv1alpha1.DetachNetworkInterfaceResponse, error) {
	m, err := r.mutate(req.GetId(), func(m *machine) (bool, error) {
		if !mutate.DetachNetworkInterface(m.rec.Machine.Spec, req.GetName()) {
			return false, nil
		}
		m.rec.detach(kindNIC, req.GetName())
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.DetachNetworkInterfaceResponse{Machine: m}, nil
}
