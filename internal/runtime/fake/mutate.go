package fake

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/mutate"
)

// mutate runs change on machine id under the lock. change reports whether it changed
// the spec; if so the generation goes up and the step towards the new spec starts. Every
// call is idempotent: a change that is already in place changes nothing (CONTRACT.md E3).
func (r *Runtime) mutate(id string, change func(m *mriv1alpha1.Machine) (bool, error)) (*mriv1alpha1.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, err := r.get(id)
	if err != nil {
		return nil, err
	}
	if err := r.injectFailure(); err != nil {
		return nil, err
	}
	before := proto.Clone(m).(*mriv1alpha1.Machine)
	changed, err := change(m)
	if err != nil {
		r.machines[id] = before
		return nil, err
	}
	if changed {
		m.Metadata.Generation++
		r.changed(mriv1alpha1.MachineEvent_TYPE_MODIFIED, m)
		r.stepLocked(id)
	} else if unsettled(m) {
		// Repeating a call whose step was lost (a silent failure) starts the step again.
		r.stepLocked(id)
	}
	if cur, ok := r.machines[id]; ok {
		return proto.Clone(cur).(*mriv1alpha1.Machine), nil
	}
	return proto.Clone(m).(*mriv1alpha1.Machine), nil
}

func (r *Runtime) DeleteMachine(_ context.Context, req *mriv1alpha1.DeleteMachineRequest) (*mriv1alpha1.DeleteMachineResponse, error) {
	_, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		if m.Metadata.DeletedAtUnixNano != 0 {
			return false, nil
		}
		m.Metadata.DeletedAtUnixNano = time.Now().UnixNano()
		m.Status.State = mriv1alpha1.MachineState_MACHINE_STATE_TERMINATING
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
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		return mutate.SetPower(m.Spec, req.GetPower()), nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.UpdateMachinePowerResponse{Machine: m}, nil
}

// rebootAnnotation records the wanted reboot token in the machine's annotations; the
// step copies it to status.reboot_token once the reset is done.
const rebootAnnotation = "anvil.dev/reboot-token"

func (r *Runtime) RebootMachine(_ context.Context, req *mriv1alpha1.RebootMachineRequest) (*mriv1alpha1.RebootMachineResponse, error) {
	if err := mutate.CheckRebootToken(req.GetToken()); err != nil {
		return nil, err
	}
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		if m.Metadata.Annotations[rebootAnnotation] == req.GetToken() {
			return false, nil
		}
		if m.Metadata.Annotations == nil {
			m.Metadata.Annotations = map[string]string{}
		}
		m.Metadata.Annotations[rebootAnnotation] = req.GetToken()
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.RebootMachineResponse{Machine: m}, nil
}

func (r *Runtime) UpdateMachineLabels(_ context.Context, req *mriv1alpha1.UpdateMachineLabelsRequest) (*mriv1alpha1.UpdateMachineLabelsResponse, error) {
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		return mutate.SetLabels(m.Metadata, req.GetLabels()), nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.UpdateMachineLabelsResponse{Machine: m}, nil
}

func (r *Runtime) AttachVolume(_ context.Context, req *mriv1alpha1.AttachVolumeRequest) (*mriv1alpha1.AttachVolumeResponse, error) {
	v := req.GetVolume()
	if err := mri.ValidateVolume(v); err != nil {
		return nil, err
	}
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		return mutate.AttachVolume(m.Spec, v)
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.AttachVolumeResponse{Machine: m}, nil
}

func (r *Runtime) DetachVolume(_ context.Context, req *mriv1alpha1.DetachVolumeRequest) (*mriv1alpha1.DetachVolumeResponse, error) {
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		return mutate.DetachVolume(m.Spec, req.GetName()), nil
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
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		return mutate.AttachNetworkInterface(m.Spec, n)
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.AttachNetworkInterfaceResponse{Machine: m}, nil
}

func (r *Runtime) DetachNetworkInterface(_ context.Context, req *mriv1alpha1.DetachNetworkInterfaceRequest) (*mriv1alpha1.DetachNetworkInterfaceResponse, error) {
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		return mutate.DetachNetworkInterface(m.Spec, req.GetName()), nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.DetachNetworkInterfaceResponse{Machine: m}, nil
}

func (r *Runtime) ReimageMachine(_ context.Context, req *mriv1alpha1.ReimageMachineRequest) (*mriv1alpha1.ReimageMachineResponse, error) {
	if err := mri.ValidateReimage(req); err != nil {
		return nil, err
	}
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		if m.Metadata.DeletedAtUnixNano != 0 {
			return false, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "machine %s is being deleted", m.Metadata.Id)
		}
		next := proto.Clone(m.Spec).(*mriv1alpha1.MachineSpec)
		if !mutate.Reimage(next, req.GetImage(), req.GetFirstBoot()) {
			return false, nil
		}
		if err := r.findImage(next); err != nil {
			return false, err
		}
		m.Spec = next
		// The new root disk: the machine boots again, from Pending.
		m.Status.State = mriv1alpha1.MachineState_MACHINE_STATE_PENDING
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.ReimageMachineResponse{Machine: m}, nil
}
