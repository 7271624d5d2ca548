package osimage

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/buildagent"
	"github.com/anvil-dev/anvil/internal/controller/requeue"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/imagebuild"
)

// logTailLines is how much of a build log an architecture's status shows.
const logTailLines = 20

// BuildReconciler runs an OSImageBuild: a builder Machine per architecture to build, the
// outcome read from the registry, the index published when they end.
type BuildReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Config    Config
	Events    *events.Recorder
	// Now is the clock (tests set it).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machinepools,verbs=get;list;watch

func (r *BuildReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Read past the cache: every decision starts from the status the last reconcile wrote
	// (a stale one would, for one, take a builder deleted after success for a lost one).
	b := &imagesv1alpha1.OSImageBuild{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	o := &imagesv1alpha1.OSImage{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.OSImage}, o); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // garbage collection removes the build
	}
	before := b.DeepCopy()
	machines, err := r.builders(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	var wake time.Time
	var news []statusEvent // recorded once the status that carries them is written
	if _, superseded := b.Annotations[imagesv1alpha1.AnnotationSuperseded]; superseded {
		// The OSImage moved on: nothing of this build runs; it resumes if the inputs come back.
		if err := r.deleteBuilders(ctx, machines, func(*computev1alpha1.Machine) bool { return true }); err != nil {
			return ctrl.Result{}, err
		}
		setCondition(&b.Status.Conditions, b.Generation, imagesv1alpha1.ConditionBuilding, false, imagesv1alpha1.ReasonSuperseded,
			"the OSImage's inputs changed: build "+b.Annotations[imagesv1alpha1.AnnotationSuperseded]+" replaces this one")
	} else {
		wake, news, err = r.runArchitectures(ctx, o, b, machines)
		if err != nil {
			return ctrl.Result{}, err
		}
		published, err := r.publish(ctx, o, b)
		if err != nil {
			return ctrl.Result{}, err
		}
		news = append(news, published...)
	}
	countPhases(b)
	if !equality.Semantic.DeepEqual(before.Status, b.Status) {
		err := r.Client.Status().Patch(ctx, b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) {
			return requeue.AfterConflict(), nil // decided again from the status that won
		}
		if err != nil {
			return ctrl.Result{}, err
		}
	}
	record(r.Events, b, news)
	if !wake.IsZero() {
		return ctrl.Result{RequeueAfter: time.Until(wake) + time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// builders lists the build's builder Machines by their labels, so a restarted controller
// finds the ones it started.
func (r *BuildReconciler) builders(ctx context.Context, b *imagesv1alpha1.OSImageBuild) ([]computev1alpha1.Machine, error) {
	list := &computev1alpha1.MachineList{}
	err := r.Client.List(ctx, list, client.InNamespace(b.Namespace), client.MatchingLabels{imagesv1alpha1.LabelBuild: b.Name})
	return list.Items, err
}

// runArchitectures decides and carries out each architecture's next step, and returns the
// earliest deadline to look again at.
func (r *BuildReconciler) runArchitectures(ctx context.Context, o *imagesv1alpha1.OSImage, b *imagesv1alpha1.OSImageBuild, machines []computev1alpha1.Machine) (time.Time, []statusEvent, error) {
	now := r.Now()
	var wake time.Time
	var news []statusEvent
	for _, in := range b.Spec.Architectures {
		arch := string(in.Architecture)
		obs := imagebuild.ArchObservation{
			Status:     archStatus(b, in.Architecture),
			Timeout:    timeoutOf(o),
			Retries:    ptrOr(o.Spec.Builder.Retries, 1),
			KeepFailed: o.Spec.Builder.KeepFailed,
		}
		mine := map[int32]*computev1alpha1.Machine{}
		for i := range machines {
			m := &machines[i]
			if m.Labels[imagesv1alpha1.LabelArchitecture] != arch {
				continue
			}
			n := attemptOf(m)
			mine[n] = m
			if n > obs.HighestAttempt {
				obs.HighestAttempt = n
			}
		}
		if obs.Status.Phase == "" {
			d, err := tagDigest(ctx, b.Spec.Output.Repository, imagebuild.HashTag(arch, in.InputHash))
			if err != nil {
				return wake, nil, fmt.Errorf("%s: looking up its hash tag: %w", arch, err)
			}
			obs.Reusable, obs.ReusedDigest = d != "", d
		}
		attempt := max(obs.Status.Attempts, obs.HighestAttempt)
		obs.Builder = observeBuilder(mine[attempt])
		if obs.Builder.Exists && !obs.Status.Phase.Done() {
			// The result is in the registry as soon as the agent pushed it, whether or not
			// the Machine's power-off has been reported yet.
			if err := r.readOutcome(ctx, b, in, attempt, &obs); err != nil {
				return wake, nil, err
			}
		}
		d := imagebuild.DecideArch(obs, now)
		if err := r.deleteBuilders(ctx, machines, func(m *computev1alpha1.Machine) bool {
			return m.Labels[imagesv1alpha1.LabelArchitecture] == arch && attemptOf(m) != d.Keep
		}); err != nil {
			return wake, nil, err
		}
		news = append(news, attemptEnded(b, obs.Status, d.Status)...)
		if d.Create {
			if err := r.createBuilder(ctx, o, b, in, d.Status.Attempts); err != nil {
				return wake, nil, err
			}
		}
		if d.Status.Attempts > 0 && d.Status.Phase != imagesv1alpha1.BuildPhaseReused {
			d.Status.Machine = imagebuild.BuilderName(b.Name, arch, d.Status.Attempts)
		}
		setArchStatus(b, d.Status)
		if !d.WakeAt.IsZero() && (wake.IsZero() || d.WakeAt.Before(wake)) {
			wake = d.WakeAt
		}
	}
	return wake, news, nil
}

// attemptEnded is the Event of an attempt that ended without an image: a person looking at
// a slow or failed build sees why each attempt ended, which the status keeps only for the last.
func attemptEnded(b *imagesv1alpha1.OSImageBuild, before, after imagesv1alpha1.ArchitectureBuildStatus) []statusEvent {
	arch := string(after.Architecture)
	switch {
	case after.Phase == imagesv1alpha1.BuildPhaseFailed && before.Phase != imagesv1alpha1.BuildPhaseFailed:
		return []statusEvent{{corev1.EventTypeWarning, "ArchitectureFailed", "Build", fmt.Sprintf("%s attempt %d: %s: %s",
			arch, after.Attempts, after.Reason, after.Message), builderOf(b, arch, after.Attempts)}}
	case after.Attempts > before.Attempts && before.Attempts > 0 && after.Reason != "":
		return []statusEvent{{corev1.EventTypeWarning, "AttemptFailed", "Build", fmt.Sprintf("%s attempt %d: %s: %s; starting attempt %d",
			arch, after.Attempts-1, after.Reason, after.Message, after.Attempts), builderOf(b, arch, after.Attempts-1)}}
	}
	return nil
}

// readOutcome reads an attempt's log artifact into the observation.
func (r *BuildReconciler) readOutcome(ctx context.Context, b *imagesv1alpha1.OSImageBuild, in imagesv1alpha1.ArchitectureInputs, attempt int32, obs *imagebuild.ArchObservation) error {
	res, tail, err := buildagent.ReadResult(ctx, b.Spec.Output.Repository, imagebuild.LogTag(string(in.Architecture), in.InputHash, attempt), logTailLines, registryOptions(ctx)...)
	switch {
	case errors.Is(err, buildagent.ErrNoResult):
		return nil // not yet, or never: the builder's state tells which
	case err != nil:
		return fmt.Errorf("%s: reading the build's result: %w", in.Architecture, err)
	}
	obs.LogTail, obs.Message, obs.Digest = tail, res.Message, res.Digest
	switch res.Status {
	case buildagent.StatusSucceeded:
		obs.Outcome = imagebuild.OutcomeSucceeded
	case buildagent.StatusStepFailed:
		obs.Outcome = imagebuild.OutcomeStepFailed
	default:
		obs.Outcome = imagebuild.OutcomeError
	}
	return nil
}

// observeBuilder reads what the decision needs of a builder Machine.
func observeBuilder(m *computev1alpha1.Machine) imagebuild.Builder {
	if m == nil || !m.DeletionTimestamp.IsZero() {
		return imagebuild.Builder{}
	}
	bld := imagebuild.Builder{
		Exists:     true,
		Created:    m.CreationTimestamp.Time,
		Running:    m.Status.State == computev1alpha1.MachineStateRunning,
		PoweredOff: m.Status.State == computev1alpha1.MachineStateShutdown,
	}
	if c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled); c != nil && c.Status == metav1.ConditionFalse {
		bld.Unschedulable = c.Message
	}
	return bld
}

func (r *BuildReconciler) deleteBuilders(ctx context.Context, machines []computev1alpha1.Machine, which func(*computev1alpha1.Machine) bool) error {
	for i := range machines {
		m := &machines[i]
		if !which(m) || !m.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, m); client.IgnoreNotFound(err) != nil {
			return err
		}
		secret := &corev1.Secret{}
		secret.Namespace, secret.Name = m.Namespace, m.Name
		if err := r.Client.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// publish assembles and pushes the index once every architecture has ended, as the
// publish policy allows, and says so in the conditions; it returns the Event of a new index.
func (r *BuildReconciler) publish(ctx context.Context, o *imagesv1alpha1.OSImage, b *imagesv1alpha1.OSImageBuild) ([]statusEvent, error) {
	var results []imagebuild.Result
	for _, st := range b.Status.Architectures {
		results = append(results, imagebuild.Result{Architecture: string(st.Architecture), Phase: st.Phase, Digest: st.Digest})
	}
	previous := map[string]string{}
	prevEntry := map[string]imagesv1alpha1.PublishedEntry{}
	for _, e := range o.Status.Published {
		previous[string(e.Architecture)], prevEntry[string(e.Architecture)] = e.Digest, e
	}
	policy := o.Spec.Publish
	if policy == "" {
		policy = imagesv1alpha1.PublishAllArchitectures
	}
	p := imagebuild.Publish(policy, results, previous)
	if o.Status.LatestBuild != b.Name {
		// Only the build of the OSImage's current inputs moves the tag: an older one,
		// reconciled again, must never put its index back.
		return nil, nil
	}
	if p.Wait || len(results) < len(b.Spec.Architectures) {
		setCondition(&b.Status.Conditions, b.Generation, imagesv1alpha1.ConditionBuilding, true, imagesv1alpha1.ReasonBuilding, buildingMessage(b))
		return nil, nil
	}
	setCondition(&b.Status.Conditions, b.Generation, imagesv1alpha1.ConditionBuilding, false, imagesv1alpha1.ReasonNotBuilding, "every architecture has ended")
	if p.Entries == nil {
		setCondition(&b.Status.Conditions, b.Generation, imagesv1alpha1.ConditionReady, false, imagesv1alpha1.ReasonBuildFailed,
			fmt.Sprintf("%s failed; the tag %s was not moved (publish: %s)", strings.Join(p.Missing, ", "), b.Spec.Output.Tag, policy))
		return nil, nil
	}
	index, err := publishIndex(ctx, b.Spec.Output.Repository, b.Spec.Output.Tag, p.Entries)
	if err != nil {
		setCondition(&b.Status.Conditions, b.Generation, imagesv1alpha1.ConditionReady, false, imagesv1alpha1.ReasonRegistryError, "publishing the index: "+err.Error())
		return nil, err
	}
	var news []statusEvent
	if b.Status.Index != index {
		news = append(news, statusEvent{corev1.EventTypeNormal, "Published", "Publish", fmt.Sprintf("index %s at %s:%s", index, b.Spec.Output.Repository, b.Spec.Output.Tag), nil})
	}
	b.Status.Index = index
	b.Status.Published = nil
	for _, in := range b.Spec.Architectures {
		arch := string(in.Architecture)
		digest, ok := p.Entries[arch]
		if !ok {
			continue
		}
		e := imagesv1alpha1.PublishedEntry{Architecture: in.Architecture, Digest: digest, InputHash: in.InputHash, Build: b.Name}
		if contains(p.CarriedForward, arch) {
			e = prevEntry[arch]
		}
		b.Status.Published = append(b.Status.Published, e)
	}
	setCondition(&b.Status.Conditions, b.Generation, imagesv1alpha1.ConditionReady, true, imagesv1alpha1.ReasonPublished,
		fmt.Sprintf("%s:%s is index %s", b.Spec.Output.Repository, b.Spec.Output.Tag, index))
	if len(p.CarriedForward) > 0 || len(p.Missing) > 0 {
		setCondition(&b.Status.Conditions, b.Generation, imagesv1alpha1.ConditionDegraded, true, imagesv1alpha1.ReasonCarriedForward,
			fmt.Sprintf("failed: %s; carried forward: %s; left out: %s", strings.Join(failedArchs(b), ", "), orNone(p.CarriedForward), orNone(p.Missing)))
	} else {
		setCondition(&b.Status.Conditions, b.Generation, imagesv1alpha1.ConditionDegraded, false, imagesv1alpha1.ReasonAllCurrent, "every architecture's entry is built from the current inputs")
	}
	return news, nil
}

func buildingMessage(b *imagesv1alpha1.OSImageBuild) string {
	var parts []string
	for _, st := range b.Status.Architectures {
		parts = append(parts, fmt.Sprintf("%s %s", st.Architecture, st.Phase))
	}
	return strings.Join(parts, ", ")
}

func failedArchs(b *imagesv1alpha1.OSImageBuild) []string {
	var out []string
	for _, st := range b.Status.Architectures {
		if st.Phase == imagesv1alpha1.BuildPhaseFailed {
			out = append(out, string(st.Architecture))
		}
	}
	return out
}

func countPhases(b *imagesv1alpha1.OSImageBuild) {
	b.Status.Reused, b.Status.Pending, b.Status.Building, b.Status.Succeeded, b.Status.Failed = 0, 0, 0, 0, 0
	for _, st := range b.Status.Architectures {
		switch st.Phase {
		case imagesv1alpha1.BuildPhaseReused:
			b.Status.Reused++
		case imagesv1alpha1.BuildPhasePending, imagesv1alpha1.BuildPhaseScheduling:
			b.Status.Pending++
		case imagesv1alpha1.BuildPhaseBuilding:
			b.Status.Building++
		case imagesv1alpha1.BuildPhaseSucceeded:
			b.Status.Succeeded++
		case imagesv1alpha1.BuildPhaseFailed:
			b.Status.Failed++
		}
	}
}

func archStatus(b *imagesv1alpha1.OSImageBuild, arch computev1alpha1.Architecture) imagesv1alpha1.ArchitectureBuildStatus {
	for _, st := range b.Status.Architectures {
		if st.Architecture == arch {
			return st
		}
	}
	return imagesv1alpha1.ArchitectureBuildStatus{Architecture: arch}
}

func setArchStatus(b *imagesv1alpha1.OSImageBuild, st imagesv1alpha1.ArchitectureBuildStatus) {
	for i := range b.Status.Architectures {
		if b.Status.Architectures[i].Architecture == st.Architecture {
			b.Status.Architectures[i] = st
			return
		}
	}
	b.Status.Architectures = append(b.Status.Architectures, st)
	sort.Slice(b.Status.Architectures, func(i, j int) bool {
		return b.Status.Architectures[i].Architecture < b.Status.Architectures[j].Architecture
	})
}

func attemptOf(m *computev1alpha1.Machine) int32 {
	n, _ := strconv.Atoi(m.Labels[imagesv1alpha1.LabelAttempt])
	return int32(n)
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
