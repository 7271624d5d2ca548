package broker

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
	"github.com/anvil-dev/anvil/internal/runtime/kit"
)

// Run watches the broker's downstream Machines and Secrets and the downstream pools,
// adopts what is there, and deletes first-boot Secrets no Machine needs any more. Calls
// answer once the downstream has been read. It returns when ctx ends or the runtime is
// closed.
func (r *Runtime) Run(ctx context.Context) error {
	ctx, end, err := r.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	defer r.secrets.ShutDown()

	if err := r.watch(ctx); err != nil {
		return err
	}
	n := r.start()
	r.opts.Logger.Info("broker runtime ready", "namespace", r.opts.Namespace, "pool", r.opts.PoolName, "machines", n)
	done, probed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		kit.Work(ctx, r.secrets, 1, r.opts.Logger, r.dropSecret)
	}()
	go func() {
		defer close(probed)
		r.probe(ctx)
	}()
	<-ctx.Done()
	r.secrets.ShutDown()
	<-done
	<-probed
	return nil
}

// watch registers the informer handlers and waits for every informer the runtime reads.
func (r *Runtime) watch(ctx context.Context) error {
	return r.Watch(ctx, r.opts.Cache,
		kit.Watched{Object: &computev1alpha1.Machine{}, Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.machineChanged(obj, false) },
			UpdateFunc: func(_, obj any) { r.machineChanged(obj, false) },
			DeleteFunc: func(obj any) { r.machineChanged(obj, true) },
		}},
		kit.Watched{Object: &corev1.Secret{}, Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.secretChanged(obj, false) },
			UpdateFunc: func(_, obj any) { r.secretChanged(obj, false) },
			DeleteFunc: func(obj any) { r.secretChanged(obj, true) },
		}},
		kit.Watched{Object: &computev1alpha1.MachinePool{}},
		kit.Watched{Object: &computev1alpha1.MachineClass{}})
}

// start computes every machine there is (adoption: the downstream is the broker's only
// state), queues Secrets without a Machine, and opens the calls; it returns how many
// machines it found.
func (r *Runtime) start() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = true
	for name := range r.objs {
		r.refreshLocked(name)
	}
	for name := range r.data {
		if _, ok := r.objs[name]; !ok {
			r.secrets.Add(name)
		}
	}
	r.Open()
	return r.Views.Len()
}

// owned reports whether a downstream object is this broker's: the cache selects by label,
// objects this runtime wrote itself are checked again.
func (r *Runtime) owned(o metav1.Object) bool {
	return o.GetNamespace() == r.opts.Namespace && o.GetLabels()[mapping.LabelPool] == r.opts.PoolName
}

func (r *Runtime) machineChanged(obj any, deleted bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(*computev1alpha1.Machine)
	if !ok || !r.owned(m) {
		return
	}
	if deleted {
		r.mu.Lock()
		same := r.objs[m.Name] != nil && r.objs[m.Name].UID == m.UID
		r.mu.Unlock()
		if same {
			r.forget(m.Name)
		}
		return
	}
	r.observe(m)
}

func (r *Runtime) secretChanged(obj any, deleted bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*corev1.Secret)
	if !ok || !r.owned(s) {
		return
	}
	if deleted {
		r.observeData(s.Name, nil)
		return
	}
	r.observeData(s.Name, s.Data)
	r.secrets.Add(s.Name)
}

// dropSecret deletes the queued first-boot Secret name if nothing holds it.
func (r *Runtime) dropSecret(ctx context.Context, name string) (time.Duration, error) {
	r.mu.Lock()
	_, held := r.objs[name]
	_, creating := r.creating[name]
	r.mu.Unlock()
	if held || creating {
		return 0, nil
	}
	err := r.opts.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.Namespace, Name: name}})
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("deleting first-boot Secret %s, which no Machine uses: %w", name, err)
	}
	return 0, nil
}
