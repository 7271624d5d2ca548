package metal

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/kit"
)

// sweepKey is the queue item that removes config-drive Secrets no machine uses.
const sweepKey = "\x00sweep"

// sweepGrace spares a Secret this young: its create may still be claiming a Host (in
// this process or another).
const sweepGrace = time.Minute

// Run watches the namespace's Hosts and HardwareData, serves disks, and drives what
// follows from Host changes: releasing the Hosts of deleted machines, copying hardware
// to tenants, removing leftovers. Calls answer once the Hosts and config drives have
// been read. It returns when ctx ends or the runtime is closed.
func (r *Runtime) Run(ctx context.Context) error {
	ctx, end, err := r.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()

	srv := &http.Server{Handler: r.imageHandler(), ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(r.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.opts.Logger.Error(err, "image server stopped")
		}
	}()
	defer srv.Close()
	defer r.queue.ShutDown()

	if err := r.watch(ctx); err != nil {
		return err
	}
	if err := r.start(ctx); err != nil {
		return err
	}
	r.opts.Logger.Info("metal runtime ready", "namespace", r.opts.Namespace, "pool", r.opts.PoolName, "images", r.imageURL)
	r.queue.Add(sweepKey)
	wg.Add(1)
	go func() {
		defer wg.Done()
		kit.Work(ctx, r.queue, r.opts.Workers, r.opts.Logger, r.handle)
	}()
	<-ctx.Done()
	return nil
}

func (r *Runtime) imageHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(imagePath, r.serveFile)
	return mux
}

// watch registers the informer handlers and waits for every informer the runtime reads.
func (r *Runtime) watch(ctx context.Context) error {
	// A Host's HardwareData has its name: new hardware may change a tenant's copy.
	enqueue := func(obj any) {
		if o, ok := obj.(client.Object); ok && o.GetNamespace() == r.opts.Namespace {
			r.queue.Add(o.GetName())
		}
	}
	return r.Watch(ctx, r.opts.Cache,
		kit.Watched{Object: &metalv1alpha1.Host{}, Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.hostChanged(obj, false) },
			UpdateFunc: func(_, obj any) { r.hostChanged(obj, false) },
			DeleteFunc: func(obj any) { r.hostChanged(obj, true) },
		}},
		kit.Watched{Object: &metalv1alpha1.HardwareData{}, Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
		}},
		kit.Watched{Object: &metalv1alpha1.HostPolicy{}},
		kit.Watched{Object: &computev1alpha1.MachineClass{}},
		kit.Watched{Object: &corev1.Namespace{}})
}

// start reads the config drives' user data, computes every machine and opens the calls.
func (r *Runtime) start(ctx context.Context) error {
	secrets := &corev1.SecretList{}
	if err := r.opts.APIReader.List(ctx, secrets, client.InNamespace(r.opts.Namespace), client.HasLabels{LabelConfigDrive}); err != nil {
		return fmt.Errorf("metal runtime: listing config drives: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range secrets.Items {
		r.drives[s.Name] = s.Data["user_data"]
	}
	r.started = true
	for name := range r.hosts {
		r.refreshLocked(name)
	}
	r.sweepSerialLocked()
	used := r.drivesInUseLocked()
	for name := range r.drives {
		if !used[name] {
			delete(r.drives, name) // a leftover the sweep removes
		}
	}
	r.Open()
	return nil
}

// hostChanged takes an informer event into the Hosts held, and queues the Host.
func (r *Runtime) hostChanged(obj any, deleted bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	h, ok := obj.(*metalv1alpha1.Host)
	if !ok || h.Namespace != r.opts.Namespace {
		return
	}
	r.mu.Lock()
	if deleted {
		if id, v, held := r.Views.Peek(h.Name); held {
			r.vacated[h.Name] = vacated{id: id, drive: v.drive, consumer: v.consumer}
		}
		delete(r.hosts, h.Name)
		if r.started {
			r.refreshLocked(h.Name)
		}
	} else {
		r.observeLocked(h)
	}
	r.mu.Unlock()
	r.queue.Add(h.Name)
}

// handle is the work of one queued key: the sweep, or one Host.
func (r *Runtime) handle(ctx context.Context, key string) (time.Duration, error) {
	if key == sweepKey {
		return r.sweep(ctx)
	}
	return 0, r.sync(ctx, key)
}

// sync brings what follows from one Host up to date: a deleted machine's Host released
// once deprovisioned, a provisioned machine's hardware copied to its tenant, the disk of
// a new claim in the cache, and what a deleted Host's machine left removed.
func (r *Runtime) sync(ctx context.Context, name string) error {
	r.mu.Lock()
	h := r.hosts[name]
	gone, wasVacated := r.vacated[name]
	r.mu.Unlock()
	if h == nil {
		if !wasVacated {
			return nil
		}
		if err := r.removeLeftovers(ctx, gone.id, gone.drive, gone.consumer); err != nil {
			return err
		}
		r.mu.Lock()
		delete(r.vacated, name)
		r.mu.Unlock()
		return nil
	}
	rec, _, err := decodeRecord(h)
	if err != nil || rec == nil {
		return nil
	}
	switch {
	case rec.DeletedAt != 0 && released(h):
		return r.release(ctx, h, rec)
	case rec.DeletedAt != 0:
		return nil // the Host controller is deprovisioning
	case provisioned(h):
		return r.project(ctx, h, rec)
	default:
		r.prefetch(h)
	}
	return nil
}

// release ends a deleted machine whose Host is deprovisioned: its tenant's hardware and
// config drive go first, while the claim still says whose they are, then the claim.
func (r *Runtime) release(ctx context.Context, h *metalv1alpha1.Host, rec *record) error {
	if err := r.removeLeftovers(ctx, rec.ID, rec.drive(), *h.Spec.ConsumerRef); err != nil {
		return err
	}
	fresh := &metalv1alpha1.Host{}
	if err := r.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(h), fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	if have, _, err := decodeRecord(fresh); err != nil || have == nil || have.ID != rec.ID || !released(fresh) {
		return nil // changed meanwhile: its event brings it back
	}
	fresh.Spec.ConsumerRef, fresh.Spec.Online = nil, false
	delete(fresh.Annotations, AnnotationMachine)
	delete(fresh.Annotations, AnnotationReboot)
	delete(fresh.Annotations, metalv1alpha1.AnnotationRebuild)
	if err := r.opts.Client.Update(ctx, fresh); err != nil {
		return err
	}
	r.assume(fresh)
	r.opts.Logger.Info("machine deleted; Host released", "machine", rec.ID, "host", h.Name)
	return nil
}

// removeLeftovers deletes a machine's config-drive Secret and its tenant's HardwareData.
func (r *Runtime) removeLeftovers(ctx context.Context, id, drive string, consumer metalv1alpha1.ConsumerReference) error {
	if err := r.unproject(ctx, consumer); err != nil {
		return err
	}
	s := &corev1.Secret{}
	s.Namespace, s.Name = r.opts.Namespace, drive
	if err := r.opts.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
		return err
	}
	r.mu.Lock()
	delete(r.projected, id)
	r.mu.Unlock()
	return nil
}

// sweep deletes config-drive Secrets no machine's record names: left by a create that
// crashed before its claim, a release that crashed after it, or replaced by a reimage's. It
// returns when to look again for Secrets too young to judge.
func (r *Runtime) sweep(ctx context.Context) (time.Duration, error) {
	secrets := &corev1.SecretList{}
	if err := r.opts.APIReader.List(ctx, secrets, client.InNamespace(r.opts.Namespace), client.HasLabels{LabelConfigDrive}); err != nil {
		return 0, err
	}
	r.mu.Lock()
	used := r.drivesInUseLocked()
	r.mu.Unlock()
	var again time.Duration
	for i := range secrets.Items {
		s := &secrets.Items[i]
		id := s.Annotations[AnnotationMachineID]
		r.mu.Lock()
		inUse := used[s.Name] || r.writing[s.Name] // a write begun since: its Secret is young anyway
		r.mu.Unlock()
		if inUse {
			continue
		}
		if age := time.Since(s.CreationTimestamp.Time); age < r.opts.sweepGrace {
			if wait := r.opts.sweepGrace - age + time.Second; again == 0 || wait < again {
				again = wait
			}
			continue
		}
		// Not if it was written since it was listed: a write means someone uses it.
		err := r.opts.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion})
		switch {
		case apierrors.IsConflict(err):
			continue
		case client.IgnoreNotFound(err) != nil:
			return 0, err
		}
		r.mu.Lock()
		delete(r.drives, s.Name)
		r.mu.Unlock()
		r.opts.Logger.Info("removed a config drive no machine uses", "machine", id, "secret", s.Name)
	}
	return again, nil
}
