package osimage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/requeue"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/imagebuild"
)

// OSImageReconciler turns an OSImage's inputs into its OSImageBuild and reports the build.
type OSImageReconciler struct {
	Client client.Client
	// APIReader reads context ConfigMaps and Secrets without caching them.
	APIReader client.Reader
	Config    Config
	Events    *events.Recorder
	// Entries is shared with the ImageUpToDateReconciler (see BootedEntries); Now is the clock
	// of the rollout's deadlines (nil: time.Now).
	Entries *BootedEntries
	Now     func() time.Time
	// roots remembers what the bases' entries hold (by digest).
	roots baseRoots
}

// +kubebuilder:rbac:groups=images.anvil.dev,resources=osimages,verbs=get;list;watch
// +kubebuilder:rbac:groups=images.anvil.dev,resources=osimages/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=images.anvil.dev,resources=osimagebuilds,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=images.anvil.dev,resources=osimagebuilds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;delete
// Secrets by name only (context files, registry credentials; builders' job and first-boot
// Secrets): list or watch would read every Secret of the cluster.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// A rollout asks a Machine to reimage by its annotations (and reads nothing else of it).
// +kubebuilder:rbac:groups=compute.anvil.dev,resources=machines,verbs=get;list;watch;patch

func (r *OSImageReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	o := &imagesv1alpha1.OSImage{}
	if err := r.Client.Get(ctx, req.NamespacedName, o); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !o.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // its builds, builders and Secrets go with it (owner references)
	}
	before := o.DeepCopy()
	pools := &computev1alpha1.MachinePoolList{}
	if err := r.Client.List(ctx, pools); err != nil {
		return ctrl.Result{}, err
	}
	o.Status.Architectures = imagebuild.TargetArchitectures(o.Spec.Architectures, readyArchitectures(pools.Items), o.Status.Architectures)
	err := r.reconcileBuild(ctx, o, pools.Items)
	var refused *refusal
	if errors.As(err, &refused) {
		setCondition(&o.Status.Conditions, o.Generation, imagesv1alpha1.ConditionReady, false, refused.reason, refused.msg)
		setCondition(&o.Status.Conditions, o.Generation, imagesv1alpha1.ConditionBuilding, false, imagesv1alpha1.ReasonNotBuilding, "the inputs are refused: "+refused.msg)
		err = nil
	}
	if err == nil {
		o.Status.ObservedGeneration = o.Generation
	}
	// A published index rolls out whatever became of the inputs since.
	news, recheck, rerr := r.reconcileRollout(ctx, o)
	if !equality.Semantic.DeepEqual(before.Status, o.Status) {
		perr := r.Client.Status().Patch(ctx, o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(perr) {
			return requeue.AfterConflict(), nil // decided again from the status that won
		}
		if perr != nil {
			return ctrl.Result{}, perr
		}
	}
	record(r.Events, o, news)
	if err = errors.Join(err, rerr); err != nil {
		return ctrl.Result{}, err
	}
	if readsSecrets(o) && (recheck == 0 || r.Config.secretRecheck() < recheck) {
		// No watch tells of a context Secret's edit (see Config.SecretRecheck): look again.
		recheck = r.Config.secretRecheck()
	}
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// readsSecrets says whether a context file of o comes from a Secret.
func readsSecrets(o *imagesv1alpha1.OSImage) bool {
	for _, f := range o.Spec.Context {
		if f.SecretKeyRef != nil {
			return true
		}
	}
	return false
}

// reconcileBuild makes sure the OSImageBuild of the current inputs exists, marks the
// other unfinished builds superseded, and copies the build's progress into the status.
func (r *OSImageReconciler) reconcileBuild(ctx context.Context, o *imagesv1alpha1.OSImage, pools []computev1alpha1.MachinePool) error {
	if err := r.Config.Validate(); err != nil {
		return refuse("BuildsNotConfigured", "this controller manager cannot build: %v (see its --builder-* flags)", err)
	}
	if len(o.Status.Architectures) == 0 {
		return refuse(imagesv1alpha1.ReasonNoArchitectures, "spec.architectures is empty and no Ready MachinePool runs any architecture yet")
	}
	in, err := r.resolve(ctx, o, o.Status.Architectures)
	if err != nil {
		return err
	}
	name := imagebuild.BuildName(o.Name, in.hashes)
	build := &imagesv1alpha1.OSImageBuild{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: name}, build)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.checkBuilderPools(ctx, o, in, pools); err != nil {
			return err
		}
		if build, err = r.createBuild(ctx, o, in, name); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if err := r.ensureJobs(ctx, o, in, build); err != nil {
		return err
	}
	if err := r.supersedeOthers(ctx, o, name); err != nil {
		return err
	}
	o.Status.LatestBuild = name
	reportBuild(o, build)
	return nil
}

// checkBuilderPools refuses inputs that need a build for an architecture no Ready pool can
// run a builder of (by architecture and class). An architecture already in the repository
// under its hash needs no builder.
func (r *OSImageReconciler) checkBuilderPools(ctx context.Context, o *imagesv1alpha1.OSImage, in *inputs, pools []computev1alpha1.MachinePool) error {
	class := o.Spec.Builder.MachineClassRef.Name
	var missing []string
	for _, a := range in.archs {
		if d, err := tagDigest(ctx, o.Spec.Output.Repository, imagebuild.HashTag(string(a), in.hashes[string(a)])); err != nil {
			return fmt.Errorf("looking up %s's hash tag: %w", a, err)
		} else if d != "" {
			continue
		}
		if !hasBuilderPool(pools, a, class, o.Spec.Builder.AllowEmulated) {
			missing = append(missing, string(a))
		}
	}
	if len(missing) > 0 {
		how := "natively (builder.allowEmulated is false)"
		if o.Spec.Builder.AllowEmulated {
			how = "natively or emulated"
		}
		return refuse(imagesv1alpha1.ReasonNoBuilderPool, "no Ready MachinePool runs %s %s with MachineClass %q for a builder",
			strings.Join(missing, ", "), how, class)
	}
	return nil
}

func (r *OSImageReconciler) createBuild(ctx context.Context, o *imagesv1alpha1.OSImage, in *inputs, name string) (*imagesv1alpha1.OSImageBuild, error) {
	b := &imagesv1alpha1.OSImageBuild{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: map[string]string{imagesv1alpha1.LabelOSImage: o.Name}},
		Spec: imagesv1alpha1.OSImageBuildSpec{
			OSImage: o.Name, Base: in.base, Output: o.Spec.Output,
		},
	}
	for _, a := range in.archs {
		b.Spec.Architectures = append(b.Spec.Architectures, imagesv1alpha1.ArchitectureInputs{
			Architecture: a, InputHash: in.hashes[string(a)], BaseDigest: in.entries[a], BuilderDigest: in.builder[a],
		})
	}
	if err := controllerutil.SetControllerReference(o, b, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	r.Events.Normal(o, "BuildCreated", "CreateBuild", "build %s for %s", name, archNames(in.archs))
	return b, nil
}

// supersedeOthers marks every other unfinished build of the OSImage superseded, and
// clears the mark on the current one (inputs may come back to an earlier build).
func (r *OSImageReconciler) supersedeOthers(ctx context.Context, o *imagesv1alpha1.OSImage, current string) error {
	builds := &imagesv1alpha1.OSImageBuildList{}
	if err := r.Client.List(ctx, builds, client.InNamespace(o.Namespace), client.MatchingLabels{imagesv1alpha1.LabelOSImage: o.Name}); err != nil {
		return err
	}
	for i := range builds.Items {
		b := &builds.Items[i]
		_, marked := b.Annotations[imagesv1alpha1.AnnotationSuperseded]
		want := b.Name != current && !buildDone(b)
		if marked == want {
			continue
		}
		patch := client.MergeFrom(b.DeepCopy())
		if want {
			metav1.SetMetaDataAnnotation(&b.ObjectMeta, imagesv1alpha1.AnnotationSuperseded, current)
		} else {
			delete(b.Annotations, imagesv1alpha1.AnnotationSuperseded)
		}
		if err := r.Client.Patch(ctx, b, patch); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// reportBuild copies the build's progress and publication into the OSImage's status.
func reportBuild(o *imagesv1alpha1.OSImage, b *imagesv1alpha1.OSImageBuild) {
	building := meta.FindStatusCondition(b.Status.Conditions, imagesv1alpha1.ConditionBuilding)
	switch {
	case building == nil:
		setCondition(&o.Status.Conditions, o.Generation, imagesv1alpha1.ConditionBuilding, true, imagesv1alpha1.ReasonBuilding, "build "+b.Name+" is starting")
	default:
		setCondition(&o.Status.Conditions, o.Generation, imagesv1alpha1.ConditionBuilding, building.Status == metav1.ConditionTrue, building.Reason, building.Message)
	}
	if ready := meta.FindStatusCondition(b.Status.Conditions, imagesv1alpha1.ConditionReady); ready != nil {
		setCondition(&o.Status.Conditions, o.Generation, imagesv1alpha1.ConditionReady, ready.Status == metav1.ConditionTrue, ready.Reason, ready.Message)
	} else {
		setCondition(&o.Status.Conditions, o.Generation, imagesv1alpha1.ConditionReady, false, imagesv1alpha1.ReasonBuilding, "build "+b.Name+" has not published yet")
	}
	if degraded := meta.FindStatusCondition(b.Status.Conditions, imagesv1alpha1.ConditionDegraded); degraded != nil {
		setCondition(&o.Status.Conditions, o.Generation, imagesv1alpha1.ConditionDegraded, degraded.Status == metav1.ConditionTrue, degraded.Reason, degraded.Message)
	}
	if b.Status.Index != "" {
		o.Status.Index = b.Status.Index
		o.Status.Published = b.Status.Published
	}
}

func setCondition(conds *[]metav1.Condition, generation int64, typ string, status bool, reason, msg string) {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation})
}

// readyArchitectures lists the architectures of the Ready pools.
func readyArchitectures(pools []computev1alpha1.MachinePool) []computev1alpha1.Architecture {
	var out []computev1alpha1.Architecture
	for _, p := range pools {
		if meta.IsStatusConditionTrue(p.Status.Conditions, computev1alpha1.ConditionReady) {
			out = append(out, p.Status.Architectures...)
		}
	}
	return out
}

// hasBuilderPool reports whether a Ready pool runs arch (natively, unless emulated is
// allowed) and offers class.
func hasBuilderPool(pools []computev1alpha1.MachinePool, arch computev1alpha1.Architecture, class string, emulated bool) bool {
	for _, p := range pools {
		if !meta.IsStatusConditionTrue(p.Status.Conditions, computev1alpha1.ConditionReady) {
			continue
		}
		archs := p.Status.Architectures
		if !emulated {
			archs = p.Status.NativeArchitectures()
		}
		runs := false
		for _, a := range archs {
			runs = runs || a == arch
		}
		offers := len(p.Status.SupportedClasses) == 0
		for _, c := range p.Status.SupportedClasses {
			offers = offers || c == class
		}
		if runs && offers {
			return true
		}
	}
	return false
}

func buildDone(b *imagesv1alpha1.OSImageBuild) bool {
	if len(b.Status.Architectures) < len(b.Spec.Architectures) {
		return false
	}
	for _, a := range b.Status.Architectures {
		if !a.Phase.Done() {
			return false
		}
	}
	return true
}

func archNames(archs []computev1alpha1.Architecture) string {
	s := make([]string, len(archs))
	for i, a := range archs {
		s[i] = string(a)
	}
	return strings.Join(s, ", ")
}
