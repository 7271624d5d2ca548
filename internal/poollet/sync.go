package poollet

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/api/meta"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/requeue"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// create resolves what the runtime needs and asks it for a machine. A refusal hands the
// Machine back to the scheduler; a missing Secret or image is a condition, not a retry loop.
func (r *MachineReconciler) create(ctx context.Context, m *computev1alpha1.Machine) (ctrl.Result, error) {
	spec, cond, err := r.desiredSpec(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	if cond != nil {
		// A missing Secret, class or image is fixed by its user (or, for a Secret, by the
		// grant on its way); the poollet may not watch Secrets (it reads only those it is
		// given), so it looks again after a while.
		return retryStale(ctrl.Result{RequeueAfter: r.lookAgain(m, *cond)}, r.condition(ctx, m, *cond))
	}
	resp, err := r.Runtime.CreateMachine(ctx, &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{
			mri.LabelMachineUID: string(m.UID), LabelMachineNamespace: m.Namespace, LabelMachineName: m.Name}},
		Spec: spec,
	}})
	if mri.IsRefusal(err) {
		log.FromContext(ctx).Info("runtime refused the machine; handing it back to the scheduler", "reason", err.Error())
		return retryStale(ctrl.Result{}, r.condition(ctx, m, metav1.Condition{Type: computev1alpha1.ConditionScheduled,
			Status: metav1.ConditionFalse, Reason: computev1alpha1.ReasonRuntimeRefused,
			Message: fmt.Sprintf("MachinePool %s refused the machine: %s", r.Pool, mri.MessageOf(err))}))
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("creating the runtime machine: %w", err)
	}
	if m.Status.MachineID == "" {
		r.Events.Normal(m, computev1alpha1.EventCreated, "Create", "runtime machine %s created on MachinePool %s", resp.GetMachine().GetMetadata().GetId(), r.Pool)
	}
	return r.report(ctx, m, resp.GetMachine())
}

// desiredSpec is the runtime spec of m. A user-fixable problem comes back as a condition.
func (r *MachineReconciler) desiredSpec(ctx context.Context, m *computev1alpha1.Machine) (*mriv1alpha1.MachineSpec, *metav1.Condition, error) {
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
	boot, cond, err := r.firstBoot(ctx, m)
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
		Power:             PowerToMRI(m.Spec.Power),
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
// or an invalid config comes back as the IgnitionReady condition to show.
func (r *MachineReconciler) firstBoot(ctx context.Context, m *computev1alpha1.Machine) (*mriv1alpha1.FirstBootConfig, *metav1.Condition, error) {
	boot, err := firstBoot(ctx, r.Reader, m)
	var missing *firstBootError
	if errors.As(err, &missing) && missing.unread {
		r.unread.failed(m, time.Now())
	} else if err == nil || missing != nil {
		r.unread.forget(client.ObjectKeyFromObject(m))
	}
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

// update brings an existing runtime machine to the Machine's image, power and reboot
// requests.
func (r *MachineReconciler) update(ctx context.Context, m *computev1alpha1.Machine, rm *mriv1alpha1.Machine) (ctrl.Result, error) {
	var extra []metav1.Condition
	if wantsReimage(m, rm) {
		res, cond, err := r.reimage(ctx, m, rm)
		if cond == nil {
			return res, err
		}
		extra = append(extra, *cond) // what keeps the machine from its new image
	} else if m.Generation != m.Status.ObservedGeneration {
		// The spec changed: a new first-boot config waits for the next reimage.
		boot, cond, err := r.firstBoot(ctx, m)
		if err != nil {
			return ctrl.Result{}, err
		}
		if cond == nil {
			cond = firstBootUpToDate(boot, rm)
			if cond.Status == metav1.ConditionTrue && meta.FindStatusCondition(m.Status.Conditions, cond.Type) == nil {
				cond = nil // it never differed: nothing to say
			}
		}
		if cond != nil {
			extra = append(extra, *cond)
		}
	}
	id := rm.GetMetadata().GetId()
	if want := PowerToMRI(m.Spec.Power); rm.GetSpec().GetPower() != want || r.stuck(rm) {
		resp, err := r.Runtime.UpdateMachinePower(ctx, &mriv1alpha1.UpdateMachinePowerRequest{Id: id, Power: want})
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("setting power: %w", err)
		}
		rm = resp.GetMachine()
	}
	if token := m.Annotations[computev1alpha1.AnnotationReboot]; token != "" && rm.GetStatus().GetRebootToken() != token {
		resp, err := r.Runtime.RebootMachine(ctx, &mriv1alpha1.RebootMachineRequest{Id: id, Token: token})
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("rebooting: %w", err)
		}
		rm = resp.GetMachine()
	}
	return r.report(ctx, m, rm, extra...)
}

// lookAgain is how long to wait before trying again what c says keeps the Machine from
// its runtime machine or its new spec: soon while a Secret it could not read may still be
// granted (secretRetry), StuckAfter for everything else.
func (r *MachineReconciler) lookAgain(m *computev1alpha1.Machine, c metav1.Condition) time.Duration {
	if since, ok := r.unread.since(m); ok && c.Type == computev1alpha1.ConditionIgnitionReady {
		return secretRetry(since, time.Now(), r.StuckAfter)
	}
	return r.StuckAfter
}

// stuck reports whether the runtime has lagged behind its spec for longer than
// StuckAfter since this poollet first saw it lag: the step may have been lost, and
// repeating the call is safe. A machine that has settled is forgotten.
func (r *MachineReconciler) stuck(rm *mriv1alpha1.Machine) bool {
	id := rm.GetMetadata().GetId()
	if settled(rm) || r.StuckAfter <= 0 {
		r.lagging.Delete(id)
		return false
	}
	since, _ := r.lagging.LoadOrStore(id, time.Now())
	if time.Since(since.(time.Time)) < r.StuckAfter {
		return false
	}
	r.lagging.Store(id, time.Now())
	return true
}

// report writes the runtime's view once it is settled, with the extra conditions the
// reconcile found; until then it waits for the runtime's next event, with a timed retry
// in case that step was lost.
func (r *MachineReconciler) report(ctx context.Context, m *computev1alpha1.Machine, rm *mriv1alpha1.Machine, extra ...metav1.Condition) (ctrl.Result, error) {
	retry := ctrl.Result{}
	for _, c := range extra {
		if c.Status == metav1.ConditionFalse && c.Type != computev1alpha1.ConditionFirstBootUpToDate {
			// The user's fix (a Secret, a registry) or a Secret's grant is not watched.
			if after := r.lookAgain(m, c); retry.RequeueAfter == 0 || after < retry.RequeueAfter {
				retry = ctrl.Result{RequeueAfter: after}
			}
		}
	}
	if !settled(rm) {
		if len(extra) > 0 {
			return retryStale(retry, r.condition(ctx, m, extra[0]))
		}
		if m.Status.MachineID == "" {
			st := *m.Status.DeepCopy()
			st.MachineID, st.Pool, st.State = rm.GetMetadata().GetId(), r.Pool, computev1alpha1.MachineStatePending
			if err := r.writeStatus(ctx, m, st); err != nil && !errors.Is(err, errRetry) {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: r.StuckAfter}, nil
	}
	st := observedStatus(m, rm, r.Pool)
	for _, c := range extra {
		c.ObservedGeneration = m.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
	ended := reimageEnded(&st, m, rm)
	if err := r.writeStatus(ctx, m, st); err != nil {
		return retryStale(retry, err)
	}
	r.stateEvent(m, m.Status.State, st.State, rm)
	if ended {
		r.Events.Normal(m, computev1alpha1.ReasonReimaged, "Reimage", "running %s on MachinePool %s", m.Spec.Image, r.Pool)
	}
	return retry, nil
}

// stateEvent records the runtime machine's move from one state to another, when it moved
// to one a person looks for.
func (r *MachineReconciler) stateEvent(m *computev1alpha1.Machine, from, to computev1alpha1.MachineState, rm *mriv1alpha1.Machine) {
	if from == to {
		return
	}
	switch to {
	case computev1alpha1.MachineStateRunning:
		r.Events.Normal(m, computev1alpha1.EventStarted, "Start", "running on MachinePool %s", r.Pool)
	case computev1alpha1.MachineStateShutdown:
		r.Events.Normal(m, computev1alpha1.EventPoweredOff, "PowerOff", "powered off on MachinePool %s", r.Pool)
	case computev1alpha1.MachineStateTerminated:
		r.Events.Warning(m, computev1alpha1.EventFailed, "Run", "MachinePool %s cannot run the machine: %s", r.Pool, failureOf(rm))
	}
}

// failureOf is what the runtime says keeps a terminated machine from running: its false
// conditions' reasons and messages.
func failureOf(rm *mriv1alpha1.Machine) string {
	var why []string
	for _, c := range rm.GetStatus().GetConditions() {
		if !c.GetStatus() {
			why = append(why, c.GetReason()+": "+c.GetMessage())
		}
	}
	if len(why) == 0 {
		return "the runtime gives no reason"
	}
	return strings.Join(why, "; ")
}

// retryStale turns a status write skipped on a stale copy into a quiet requeue.
func retryStale(res ctrl.Result, err error) (ctrl.Result, error) {
	if errors.Is(err, errRetry) {
		return requeue.AfterConflict(), nil
	}
	return res, err
}
