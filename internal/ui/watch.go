package ui

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/ui/view"
)

// rowers are, for each kind, an empty object of it and the function that makes its row.
var rowers = map[view.Kind]struct {
	object func() client.Object
	row    func(client.Object) any
}{
	view.KindPool: {func() client.Object { return &computev1alpha1.MachinePool{} },
		func(o client.Object) any { return view.PoolOf(o.(*computev1alpha1.MachinePool)) }},
	view.KindMachine: {func() client.Object { return &computev1alpha1.Machine{} },
		func(o client.Object) any { return view.MachineOf(o.(*computev1alpha1.Machine)) }},
	view.KindHost: {func() client.Object { return &metalv1alpha1.Host{} },
		func(o client.Object) any { return view.HostOf(o.(*metalv1alpha1.Host)) }},
	view.KindImage: {func() client.Object { return &imagesv1alpha1.OSImage{} },
		func(o client.Object) any { return view.ImageOf(o.(*imagesv1alpha1.OSImage)) }},
	view.KindBuild: {func() client.Object { return &imagesv1alpha1.OSImageBuild{} },
		func(o client.Object) any { return view.BuildOf(o.(*imagesv1alpha1.OSImageBuild)) }},
	view.KindCluster: {func() client.Object { return &clusterv1.Cluster{} },
		func(o client.Object) any { return view.ClusterOf(o.(*clusterv1.Cluster)) }},
}

// Scheme has every kind the UI reads.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{computev1alpha1.AddToScheme, imagesv1alpha1.AddToScheme, metalv1alpha1.AddToScheme, clusterv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Watch fills feed with the rows of every kind scope lets the user watch, and keeps them
// current, until ctx ends: one informer per kind (a list, then a watch), in the places the
// scope names, through cfg (the user's credentials). It returns once the first lists are in.
func Watch(ctx context.Context, cfg *rest.Config, scope Scope, feed *Feed) error {
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	opts := cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{},
		// Rows are made from the objects; managed fields are the bulk of what is cached
		// and no page reads them.
		DefaultTransform: cache.TransformStripManagedFields()}
	var kinds []view.Kind
	for kind, access := range scope {
		if !access.Watched() {
			continue
		}
		kinds = append(kinds, kind)
		if !access.All {
			namespaces := map[string]cache.Config{}
			for _, ns := range access.Namespaces {
				namespaces[ns] = cache.Config{}
			}
			opts.ByObject[rowers[kind].object()] = cache.ByObject{Namespaces: namespaces}
		}
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		return err
	}
	synced := map[view.Kind]func() bool{}
	for _, kind := range kinds {
		inf, err := c.GetInformer(ctx, rowers[kind].object())
		if err != nil {
			return fmt.Errorf("watching %s: %w", kind, err)
		}
		if _, err := inf.AddEventHandler(handler(feed, kind)); err != nil {
			return err
		}
		synced[kind] = inf.HasSynced
	}
	stopped := make(chan error, 1)
	go func() { stopped <- c.Start(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !c.WaitForCacheSync(syncCtx) {
		select {
		case err := <-stopped:
			return fmt.Errorf("watching: %w", err)
		default:
		}
		var pending []view.Kind
		for kind, ok := range synced {
			if !ok() {
				pending = append(pending, kind)
			}
		}
		// A list refused after the access review said yes (RBAC changed since, a webhook)
		// is retried forever by the informer: say which, rather than hang.
		return fmt.Errorf("the first lists of %v did not complete within %s", pending, syncTimeout)
	}
	return nil
}

// syncTimeout bounds the first lists: 10,000 Machines list in seconds.
const syncTimeout = 2 * time.Minute

// handler puts each object's row in feed, and removes it when the object goes.
func handler(feed *Feed, kind view.Kind) toolscache.ResourceEventHandler {
	put := func(obj any) {
		if o, ok := obj.(client.Object); ok {
			feed.Put(kind, key(o), rowers[kind].row(o))
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    put,
		UpdateFunc: func(_, obj any) { put(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := obj.(client.Object); ok {
				feed.Delete(kind, key(o))
			}
		},
	}
}

func key(o client.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}
