package poollet

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/poollet/machineplan"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// create resolves what the runtime needs and asks it for a machine, recording on p what
// came of it: a problem its user must fix, a refusal, or the new machine.
func (r *MachineReconciler) create(ctx context.Context, p *machineplan.Pass) error {
	m := p.Machine
	spec, cond, err := r.desiredSpec(ctx, p)
	if err != nil {
		return err
	}
	if cond != nil {
		p.Problem(*cond)
		return nil
	}
	resp, err := r.Runtime.CreateMachine(ctx, &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{
			mri.LabelMachineUID: string(m.UID), LabelMachineNamespace: m.Namespace, LabelMachineName: m.Name}},
		Spec: spec,
	}})
	if mri.IsRefusal(err) {
		log.FromContext(ctx).Info("runtime refused the machine; handing it back to the scheduler", "reason", err.Error())
		p.Refused(mri.MessageOf(err))
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating the runtime machine: %w", err)
	}
	r.emit(m, p.Created(resp.GetMachine()))
	return nil
}

// desiredSpec is the runtime spec of m. A user-fixable problem comes back as a condition.
func (r *MachineReconciler) desiredSpec(ctx context.Context, p *machineplan.Pass) (*mriv1alpha1.MachineSpec, *metav1.Condition, error) {
	m := p.Machine
	class := &computev1alpha1.MachineClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: m.Spec.MachineClassRef.Name}, class); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, &metav1.Condition{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: computev1alpha1.ReasonClassNotFound, Message: fmt.Sprintf("MachineClass %q does not exist", m.Spec.MachineClassRef.Name)}, nil
		}
		return nil, nil, err
	}
	arch := r.chooseArchitecture(m, class)
	if arch == "" {
		// The scheduler should not have sent it here: hand it back.
		return nil, &metav1.Condition{Type: computev1alpha1.ConditionScheduled, Status: metav1.ConditionFalse,
			Reason: computev1alpha1.ReasonRuntimeRefused, Message: fmt.Sprintf("MachinePool %s runs none of the architectures the Machine allows", r.Pool)}, nil
	}
	if cond, err := r.admits(ctx, m); cond != nil || err != nil {
		return nil, cond, err
	}
	digest, cond := r.resolveImage(ctx, m, arch)
	if cond != nil {
		return nil, cond, nil
	}
	boot, cond, err := r.firstBoot(ctx, p)
	if cond != nil || err != nil {
		return nil, cond, err
	}
	nicRefs := map[string]computev1alpha1.NetworkInterfaceSpec{}
	for _, n := range m.Spec.NetworkInterfaces {
		if n.NetworkInterfaceRef == nil {
			continue
		}
		obj := &computev1alpha1.NetworkInterface{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: n.NetworkInterfaceRef.Name}, obj); err == nil {
			nicRefs[obj.Name] = obj.Spec
		} else if client.IgnoreNotFound(err) != nil {
			return nil, nil, err
		}
	}
	nics, err := nicsToMRI(m, nicRefs)
	if err != nil {
		return nil, &metav1.Condition{Type: computev1alpha1.ConditionNetworkInterfacesReady, Status: metav1.ConditionFalse,
			Reason: "NotFound", Message: err.Error()}, nil
	}
	if cond, err := r.admitsNetworks(ctx, m, nics); cond != nil || err != nil {
		return nil, cond, err
	}
	spec := &mriv1alpha1.MachineSpec{
		Class:             class.Name,
		Resources:         mri.ResourcesToMRI(class.Capabilities),
		Image:             &mriv1alpha1.Image{Reference: m.Spec.Image, Digest: digest},
		Architecture:      mri.ArchToMRI(arch),
		Power:             mri.PowerToMRI(m.Spec.Power),
		FirstBoot:         boot,
		Volumes:           volumesToMRI(m),
		NetworkInterfaces: nics,
		Hostname:          hostname(m),
		Placement:         mri.PlacementToMRI(m.Spec.Tolerations, m.Spec.Emulation),
	}
	if err := mri.HostSelectorToMRI(m.Spec.HostSelector, spec); err != nil {
		return nil, &metav1.Condition{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: computev1alpha1.ReasonInvalidHostSelector, Message: err.Error()}, nil
	}
	return spec, nil, nil
}

// hostname is the guest's hostname: the Machine's spec.hostname, else its name.
func hostname(m *computev1alpha1.Machine) string {
	if m.Spec.Hostname != "" {
		return m.Spec.Hostname
	}
	return m.Name
}

// resolveImage is the digest of the Machine's image for arch; an image of another
// namespace, or a registry that refuses or cannot answer, comes back as the ImageReady
// condition to show.
func (r *MachineReconciler) resolveImage(ctx context.Context, m *computev1alpha1.Machine, arch computev1alpha1.Architecture) (string, *metav1.Condition) {
	if cond := r.imageNotOwned(m); cond != nil {
		return "", cond
	}
	digest, err := r.Images.Resolve(ctx, m.Spec.Image, arch)
	if refused := (*registrynet.RefusedError)(nil); errors.As(err, &refused) {
		return "", &metav1.Condition{Type: computev1alpha1.ConditionImageReady, Status: metav1.ConditionFalse,
			Reason: computev1alpha1.ReasonRegistryRefused, Message: fmt.Sprintf("image %s: %s", m.Spec.Image, refused.Public())}
	}
	if err != nil {
		return "", &metav1.Condition{Type: computev1alpha1.ConditionImageReady, Status: metav1.ConditionFalse,
			Reason: computev1alpha1.ReasonImageResolveFailed, Message: err.Error()}
	}
	return digest, nil
}

// firstBoot is the Machine's first-boot config as the runtime takes it; a missing Secret
// or an invalid config comes back as the IgnitionReady condition to show. Since when the
// Secret could not be read is kept, and told to p.
func (r *MachineReconciler) firstBoot(ctx context.Context, p *machineplan.Pass) (*mriv1alpha1.FirstBootConfig, *metav1.Condition, error) {
	m := p.Machine
	boot, err := firstBoot(ctx, r.Reader, m)
	var missing *firstBootError
	if errors.As(err, &missing) && missing.unread {
		r.unread.failed(m, time.Now())
	} else if err == nil || missing != nil {
		r.unread.forget(client.ObjectKeyFromObject(m))
	}
	p.SecretUnreadSince = r.unread.sinceOf(m)
	if missing != nil {
		return nil, &metav1.Condition{Type: computev1alpha1.ConditionIgnitionReady, Status: metav1.ConditionFalse,
			Reason: missing.reason, Message: missing.msg}, nil
	}
	return boot, nil, err
}

// chooseArchitecture is the pool's most preferred architecture that the Machine and its
// class allow (run natively, when the Machine forbids emulation), or "".
func (r *MachineReconciler) chooseArchitecture(m *computev1alpha1.Machine, class *computev1alpha1.MachineClass) computev1alpha1.Architecture {
	for _, e := range r.Architectures() {
		a := e.Architecture
		if (m.Spec.Architecture == "" || m.Spec.Architecture == a) && (class.Architecture == "" || class.Architecture == a) &&
			(m.Spec.Emulation != computev1alpha1.EmulationForbidden || e.Execution == computev1alpha1.ExecutionNative) {
			return a
		}
	}
	return ""
}
