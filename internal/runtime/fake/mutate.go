package fake

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
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
	if req.GetPower() == mriv1alpha1.Power_POWER_UNSPECIFIED {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "power is unspecified: set POWER_ON or POWER_OFF")
	}
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		if m.Spec.Power == req.GetPower() {
			return false, nil
		}
		m.Spec.Power = req.GetPower()
		return true, nil
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
	if req.GetToken() == "" {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "a reboot needs a token")
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
		labels := map[string]string{}
		for k, v := range req.GetLabels() {
			labels[k] = v
		}
		labels[mri.LabelMachineUID] = m.Metadata.Labels[mri.LabelMachineUID] // never dropped
		if equalMaps(labels, m.Metadata.Labels) {
			return false, nil
		}
		m.Metadata.Labels = labels
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.UpdateMachineLabelsResponse{Machine: m}, nil
}

func (r *Runtime) AttachVolume(_ context.Context, req *mriv1alpha1.AttachVolumeRequest) (*mriv1alpha1.AttachVolumeResponse, error) {
	v := req.GetVolume()
	if v.GetName() == "" || v.GetSource() == nil {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "a volume needs a name and a source")
	}
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		for _, have := range m.Spec.Volumes {
			if have.GetName() == v.GetName() {
				if proto.Equal(have, v) {
					return false, nil
				}
				return false, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, "volume %q is attached with another source", v.GetName())
			}
		}
		m.Spec.Volumes = append(m.Spec.Volumes, proto.Clone(v).(*mriv1alpha1.Volume))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.AttachVolumeResponse{Machine: m}, nil
}

func (r *Runtime) DetachVolume(_ context.Context, req *mriv1alpha1.DetachVolumeRequest) (*mriv1alpha1.DetachVolumeResponse, error) {
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		for i, have := range m.Spec.Volumes {
			if have.GetName() == req.GetName() {
				m.Spec.Volumes = append(m.Spec.Volumes[:i], m.Spec.Volumes[i+1:]...)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.DetachVolumeResponse{Machine: m}, nil
}

func (r *Runtime) AttachNetworkInterface(_ context.Context, req *mriv1alpha1.AttachNetworkInterfaceRequest) (*mriv1alpha1.AttachNetworkInterfaceResponse, error) {
	n := req.GetNetworkInterface()
	if n.GetName() == "" || n.GetNetwork() == "" {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "a network interface needs a name and a network")
	}
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		for _, have := range m.Spec.NetworkInterfaces {
			if have.GetName() == n.GetName() {
				if proto.Equal(have, n) {
					return false, nil
				}
				return false, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, "network interface %q is attached with other settings", n.GetName())
			}
		}
		m.Spec.NetworkInterfaces = append(m.Spec.NetworkInterfaces, proto.Clone(n).(*mriv1alpha1.NetworkInterface))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.AttachNetworkInterfaceResponse{Machine: m}, nil
}

func (r *Runtime) DetachNetworkInterface(_ context.Context, req *mriv1alpha1.DetachNetworkInterfaceRequest) (*mriv1alpha1.DetachNetworkInterfaceResponse, error) {
	m, err := r.mutate(req.GetId(), func(m *mriv1alpha1.Machine) (bool, error) {
		for i, have := range m.Spec.NetworkInterfaces {
			if have.GetName() == req.GetName() {
				m.Spec.NetworkInterfaces = append(m.Spec.NetworkInterfaces[:i], m.Spec.NetworkInterfaces[i+1:]...)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return &mriv1alpha1.DetachNetworkInterfaceResponse{Machine: m}, nil
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}
