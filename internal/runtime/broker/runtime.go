package broker

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/mutate"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
	"github.com/anvil-dev/anvil/internal/runtime/kit"
)

// Runtime is the broker runtime. Create it with New, call Run, Close it to stop.
type Runtime struct {
	// Base answers Version, ListMachines and WatchEvents from the machines made from the
	// downstream Machines (by name), and holds Run's lifecycle.
	kit.Base[struct{}]
	// Fixed answers the hot-plug calls: a downstream Machine's volumes and NICs cannot
	// change once it is bound (its CRD says so; CONTRACT.md E6).
	mutate.Fixed

	opts   Options
	target mapping.Target
	// secrets queues first-boot Secrets to delete once no Machine and no create holds them.
	secrets workqueue.TypedRateLimitingInterface[string]

	// createMu makes creates admit one at a time, so two never take the same room.
	createMu sync.Mutex

	mu sync.Mutex
	// objs are the broker's downstream Machines by name, as last seen from the informer or
	// this runtime's own writes, whichever is newer. Stored objects are never modified.
	objs map[string]*computev1alpha1.Machine
	// data are the first-boot Secrets' data by name.
	data map[string]map[string][]byte
	// creating are the Machines whose create is under way, by name: admitted, so counted
	// against capacity, and their Secret may exist before them.
	creating map[string]*computev1alpha1.Machine
	// unreachable says why the downstream API has not answered for UnreachableAfter; ""
	// while it answers.
	unreachable string
	started     bool
}

// New makes a runtime; Run serves.
func New(opts Options) (*Runtime, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	r := &Runtime{
		Base:    kit.NewBase[struct{}]("broker", opts.PoolName, "reading the downstream cluster"),
		opts:    opts,
		target:  mapping.Target{Namespace: opts.Namespace, Pool: opts.PoolName, PoolSelector: opts.PoolSelector},
		secrets: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		objs:    map[string]*computev1alpha1.Machine{}, data: map[string]map[string][]byte{},
		creating: map[string]*computev1alpha1.Machine{},
	}
	r.Fixed = mutate.Fixed{NoVolumeHotplug: noVolumeHotplug, NoNICHotplug: noNICHotplug, Machine: r.Base.Machine}
	return r, nil
}

// Close stops Run and event streams. Downstream objects stay; a new Runtime of the same
// pool and namespace reports them again.
func (r *Runtime) Close() {
	r.Stop(func() {
		r.Views.Close()
		r.secrets.ShutDown()
	}, nil)
}

// Status is the capacity of the downstream pools the broker may use (mapping.Site).
func (r *Runtime) Status(ctx context.Context, _ *mriv1alpha1.StatusRequest) (*mriv1alpha1.StatusResponse, error) {
	if err := r.AwaitReady(ctx); err != nil {
		return nil, err
	}
	site, err := r.site(ctx)
	if err != nil {
		return nil, err
	}
	return site.Status(), nil
}

// site is the downstream as capacity sees it, from the cache and the Machines held.
func (r *Runtime) site(ctx context.Context) (mapping.Site, error) {
	pools := &computev1alpha1.MachinePoolList{}
	if err := r.opts.Cache.List(ctx, pools); err != nil {
		return mapping.Site{}, unavailable("listing MachinePools", err)
	}
	classes := &computev1alpha1.MachineClassList{}
	if err := r.opts.Cache.List(ctx, classes); err != nil {
		return mapping.Site{}, unavailable("listing MachineClasses", err)
	}
	s := mapping.Site{Pools: pools.Items, Classes: classes.Items}
	if len(r.opts.PoolSelector) > 0 {
		s.Selector = labels.SelectorFromSet(r.opts.PoolSelector)
	}
	r.mu.Lock()
	for _, m := range r.objs {
		s.Machines = append(s.Machines, *m)
	}
	for name, m := range r.creating {
		if _, made := r.objs[name]; !made {
			s.Machines = append(s.Machines, *m)
		}
	}
	r.mu.Unlock()
	return s, nil
}

// view returns a copy of the machine of downstream name, nil when there is none.
func (r *Runtime) view(name string) *mriv1alpha1.Machine {
	m, _ := r.Views.ByKey(name)
	return m
}

// machine returns a copy of the machine with id and its downstream name, or NOT_FOUND.
func (r *Runtime) machine(id string) (*mriv1alpha1.Machine, string, error) {
	m, name, _, err := r.Views.ByID(id)
	return m, name, err
}

// observe keeps m unless the object held is newer: an informer event may arrive after
// this runtime's own write of a later version.
func (r *Runtime) observe(m *computev1alpha1.Machine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if have, ok := r.objs[m.Name]; ok && have.UID == m.UID && mri.NewerResourceVersion(have.ResourceVersion, m.ResourceVersion) {
		return
	}
	r.objs[m.Name] = m
	r.refreshLocked(m.Name)
}

// forget drops a Machine that is gone and queues its Secret.
func (r *Runtime) forget(name string) {
	r.mu.Lock()
	delete(r.objs, name)
	r.refreshLocked(name)
	r.mu.Unlock()
	r.secrets.Add(name)
}

// observeData keeps a first-boot Secret's data (nil: gone).
func (r *Runtime) observeData(name string, data map[string][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if data == nil {
		delete(r.data, name)
	} else {
		r.data[name] = data
	}
	r.refreshLocked(name)
}

// refreshLocked recomputes the machine of downstream name and tells watchers what
// changed. mu must be held.
func (r *Runtime) refreshLocked(name string) {
	if !r.started {
		return
	}
	var next *mriv1alpha1.Machine
	if obj, ok := r.objs[name]; ok {
		m, err := mapping.Upstream(mapping.Observed{Machine: obj, SecretData: r.data[name],
			Unreachable: r.unreachable != "", UnreachableMessage: r.unreachable})
		if err != nil {
			// Only a hand edit breaks a record: leave the Machine to its operators.
			r.opts.Logger.Error(err, "downstream Machine carries an unreadable record; not reporting it", "machine", name)
		}
		next = m
	}
	r.Views.Set(name, next, struct{}{})
}

// unavailable is a downstream failure the caller retries.
func unavailable(what string, err error) error {
	return status.Errorf(codes.Unavailable, "broker runtime: %s: %v", what, err)
}
