package osimage

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/index"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/imagebuild"
)

// Setup registers both controllers with the manager.
func Setup(mgr ctrl.Manager, cfg Config, concurrency int) error {
	c := mgr.GetClient()
	entries := &BootedEntries{}
	images := &OSImageReconciler{Client: c, APIReader: mgr.GetAPIReader(), Config: cfg, Events: events.New(mgr.GetEventRecorder("osimage"), nil),
		Entries: entries, Now: time.Now}
	err := ctrl.NewControllerManagedBy(mgr).Named("osimage").
		// The published index is the rollout's target: whoever moves it, the rollout follows.
		For(&imagesv1alpha1.OSImage{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.(*imagesv1alpha1.OSImage).Status.Index != e.ObjectNew.(*imagesv1alpha1.OSImage).Status.Index
			}}))).
		Owns(&imagesv1alpha1.OSImageBuild{}).
		// A rollout moves on as its Machines come and go, are asked, go down and come back.
		Watches(&computev1alpha1.Machine{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, m client.Object) []reconcile.Request {
			return osImagesOf(ctx, c, m.(*computev1alpha1.Machine))
		}), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return rolloutView(e.ObjectOld.(*computev1alpha1.Machine)) != rolloutView(e.ObjectNew.(*computev1alpha1.Machine))
		}})).
		// The fleet's architectures and its builder pools come from the pools.
		Watches(&computev1alpha1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return allOSImages(ctx, c)
		})).
		// A context file's content is part of its architecture's inputs. Metadata only: a
		// change moves the resourceVersion. Secrets are not watched: the reconciler looks
		// at them again (Config.SecretRecheck).
		Watches(&corev1.ConfigMap{}, readersOf(c, "ConfigMap"), builder.OnlyMetadata).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(images)
	if err != nil {
		return err
	}
	if err := setupImageUpToDate(mgr, entries); err != nil {
		return err
	}
	builds := &BuildReconciler{Client: c, APIReader: mgr.GetAPIReader(), Config: cfg, Events: events.New(mgr.GetEventRecorder("osimagebuild"), nil), Now: time.Now}
	return ctrl.NewControllerManagedBy(mgr).Named("osimagebuild").
		For(&imagesv1alpha1.OSImageBuild{}).
		Owns(&computev1alpha1.Machine{}).
		// A build reads its OSImage's builder settings and published entries.
		Watches(&imagesv1alpha1.OSImage{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return buildsOf(ctx, c, o)
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(builds)
}

// readersOf maps a ConfigMap to the OSImages whose context reads it.
func readersOf(c client.Client, kind string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return listed(ctx, c, &imagesv1alpha1.OSImageList{}, "the OSImages reading a "+kind,
			client.InNamespace(o.GetNamespace()), client.MatchingFields{index.OSImageContextRefs: index.ContextRef(kind, o.GetName())})
	})
}

func allOSImages(ctx context.Context, c client.Client) []reconcile.Request {
	return listed(ctx, c, &imagesv1alpha1.OSImageList{}, "OSImages for a pool change")
}

func buildsOf(ctx context.Context, c client.Client, o client.Object) []reconcile.Request {
	return listed(ctx, c, &imagesv1alpha1.OSImageBuildList{}, "an OSImage's builds",
		client.InNamespace(o.GetNamespace()), client.MatchingLabels{imagesv1alpha1.LabelOSImage: o.GetName()})
}

// listed is every map function here: list what an event concerns, reconcile each.
func listed(ctx context.Context, c client.Client, list client.ObjectList, what string, opts ...client.ListOption) []reconcile.Request {
	if err := c.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing "+what)
		return nil
	}
	var reqs []reconcile.Request
	_ = meta.EachListItem(list, func(item runtime.Object) error {
		if o, ok := item.(client.Object); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
		return nil
	})
	return reqs
}

// SetupImageUpToDate registers the ImageUpToDate controller: it looks at a Machine when the
// Machine changes and when an OSImage naming its tag publishes. It needs the field indexes
// of package index.
func SetupImageUpToDate(mgr ctrl.Manager) error { return setupImageUpToDate(mgr, &BootedEntries{}) }

func setupImageUpToDate(mgr ctrl.Manager, entries *BootedEntries) error {
	c := mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).Named("imageuptodate").
		For(&computev1alpha1.Machine{}).
		Watches(&imagesv1alpha1.OSImage{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return machinesNaming(ctx, c, o.(*imagesv1alpha1.OSImage))
		})).
		Complete(&ImageUpToDateReconciler{Client: c, Events: events.New(mgr.GetEventRecorder("imageuptodate"), nil), Entries: entries})
}

func machinesNaming(ctx context.Context, c client.Client, o *imagesv1alpha1.OSImage) []reconcile.Request {
	tag := index.OutputTag(o)
	if tag == "" {
		return nil
	}
	return listed(ctx, c, &computev1alpha1.MachineList{}, "the Machines booting an OSImage's output",
		client.InNamespace(o.Namespace), client.MatchingFields{index.MachineImageTag: tag})
}

// osImagesOf maps a Machine to the OSImages publishing the tag its spec names.
func osImagesOf(ctx context.Context, c client.Client, m *computev1alpha1.Machine) []reconcile.Request {
	tag := imagebuild.TagName(m.Spec.Image)
	if tag == "" {
		return nil
	}
	return listed(ctx, c, &imagesv1alpha1.OSImageList{}, "the OSImages publishing a Machine's tag",
		client.InNamespace(m.Namespace), client.MatchingFields{index.OSImageOutputTag: tag})
}

// rolloutView is what a rollout reads of a Machine, in one string: a Machine's other
// changes (its addresses, its other conditions' times) wake no OSImage.
func rolloutView(m *computev1alpha1.Machine) string {
	var pool string
	var booted computev1alpha1.BootedImage
	if m.Spec.MachinePoolRef != nil {
		pool = m.Spec.MachinePoolRef.Name
	}
	if m.Status.Image != nil {
		booted = *m.Status.Image
	}
	view := fmt.Sprint(m.Spec.Image, m.Spec.ImageUpdatePolicy, m.Spec.Power, pool, !m.DeletionTimestamp.IsZero(),
		m.Annotations[imagesv1alpha1.AnnotationRolloutTarget], m.Annotations[imagesv1alpha1.AnnotationRolloutAskedAt],
		m.Status.State, booted, m.Status.Architecture)
	for _, t := range []string{computev1alpha1.ConditionReady, computev1alpha1.ConditionReimaging} {
		if c := meta.FindStatusCondition(m.Status.Conditions, t); c != nil {
			view += fmt.Sprint(c.Status, c.Reason, c.Message)
		}
	}
	return view
}
