package broker

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/events"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
)

// Version of this runtime, reported by the Version call.
const Version = "0.1.0"

// watchBuffer is how many events a stream may fall behind before it is dropped and its
// client reconnects for the full list.
const watchBuffer = 1024

// Runtime is the broker runtime. Create it with New, call Run, Close it to stop.
type Runtime struct {
	mriv1alpha1.UnimplementedMachineRuntimeServer

	opts   Options
	target mapping.Target
	// secrets queues first-boot Secrets to delete once no Machine and no create holds them.
	secrets workqueue.TypedRateLimitingInterface[string]

	closing context.Context
	close   context.CancelFunc
	ready   chan struct{}
	runDone chan struct{}

	// createMu makes creates admit one at a time, so two never take the same room.
	createMu sync.Mutex

	mu sync.Mutex
	// objs are the broker's downstream Machines by name, as last seen from the informer or
	// this runtime's own writes, whichever is newer. Stored objects are never modified.
	objs map[string]*computev1alpha1.Machine
	// data are the first-boot Secrets' data by name.
	data map[string]map[string][]byte
	// views are the MRI machines by downstream name, and the name of each id.
	views map[string]*mriv1alpha1.Machine
	byID  map[string]string
	// creating are the Machines whose create is under way, by name: admitted, so counted
	// against capacity, and their Secret may exist before them.
	creating map[string]*computev1alpha1.Machine
	// unreachable says why the downstream API has not answered for UnreachableAfter; ""
	// while it answers.
	unreachable string
	events      *events.Hub
	started     bool
	running     bool
	closed      bool
}

// New makes a runtime; Run serves.
func New(opts Options) (*Runtime, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	r := &Runtime{
		opts:    opts,
		target:  mapping.Target{Namespace: opts.Namespace, Pool: opts.PoolName, PoolSelector: opts.PoolSelector},
		secrets: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		ready:   make(chan struct{}), runDone: make(chan struct{}),
		objs: map[string]*computev1alpha1.Machine{}, data: map[string]map[string][]byte{},
		views: map[string]*mriv1alpha1.Machine{}, byID: map[string]string{}, creating: map[string]*computev1alpha1.Machine{},
		events: events.NewHub(watchBuffer),
	}
	r.closing, r.close = context.WithCancel(context.Background())
	return r, nil
}

// Ready is closed once Run has read the downstream; calls made before wait for it.
func (r *Runtime) Ready() <-chan struct{} { return r.ready }

// Close stops Run and event streams. Downstream objects stay; a new Runtime of the same
// pool and namespace reports them again.
func (r *Runtime) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	running := r.running
	r.events.Close()
	r.mu.Unlock()
	r.close()
	r.secrets.ShutDown()
	if running {
		<-r.runDone
	}
}

// awaitReady holds a call until Run has read the downstream: before that, every answer
// would be about an empty pool.
func (r *Runtime) awaitReady(ctx context.Context) error {
	select {
	case <-r.ready:
		return nil
	case <-r.closing.Done():
		return status.Error(codes.Unavailable, "broker runtime: closed")
	case <-ctx.Done():
		return status.Error(codes.Unavailable, "broker runtime: still reading the downstream cluster")
	}
}

func (r *Runtime) Version(context.Context, *mriv1alpha1.VersionRequest) (*mriv1alpha1.VersionResponse, error) {
	return &mriv1alpha1.VersionResponse{RuntimeName: "broker/" + r.opts.PoolName, RuntimeVersion: Version,
		MriVersion: "v1alpha1", Pool: r.opts.PoolName}, nil
}

// Status is the capacity of the downstream pools the broker may use (mapping.Site).
func (r *Runtime) Status(ctx context.Context, _ *mriv1alpha1.StatusRequest) (*mriv1alpha1.StatusResponse, error) {
	if err := r.awaitReady(ctx); err != nil {
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

func (r *Runtime) ListMachines(ctx context.Context, req *mriv1alpha1.ListMachinesRequest) (*mriv1alpha1.ListMachinesResponse, error) {
	if err := r.awaitReady(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &mriv1alpha1.ListMachinesResponse{}
	for _, m := range r.views {
		if mri.Lists(req, m) {
			resp.Machines = append(resp.Machines, proto.Clone(m).(*mriv1alpha1.Machine))
		}
	}
	return resp, nil
}

// WatchEvents sends every machine, then every change, until the client goes away or the
// runtime closes.
func (r *Runtime) WatchEvents(_ *mriv1alpha1.WatchEventsRequest, stream mriv1alpha1.MachineRuntime_WatchEventsServer) error {
	if err := r.awaitReady(stream.Context()); err != nil {
		return err
	}
	r.mu.Lock()
	current := make([]*mriv1alpha1.Machine, 0, len(r.views))
	for _, m := range r.views {
		current = append(current, m)
	}
	sub := r.events.Subscribe(current)
	r.mu.Unlock()
	return sub.Stream(stream)
}

// view returns a copy of the machine of downstream name, nil when there is none.
func (r *Runtime) view(name string) *mriv1alpha1.Machine {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.views[name]; ok {
		return proto.Clone(m).(*mriv1alpha1.Machine)
	}
	return nil
}

// machine returns a copy of the machine with id and its downstream name, or NOT_FOUND.
func (r *Runtime) machine(id string) (*mriv1alpha1.Machine, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name, ok := r.byID[id]
	if !ok {
		return nil, "", mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "machine %q not found", id)
	}
	return proto.Clone(r.views[name]).(*mriv1alpha1.Machine), name, nil
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
	prev, had := r.views[name]
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
	if had && (next == nil || next.Metadata.Id != prev.Metadata.Id) {
		delete(r.views, name)
		delete(r.byID, prev.Metadata.Id)
		r.events.Publish(mriv1alpha1.MachineEvent_TYPE_DELETED, prev)
		had = false
	}
	if next == nil {
		return
	}
	r.views[name], r.byID[next.Metadata.Id] = next, name
	switch {
	case !had:
		r.events.Publish(mriv1alpha1.MachineEvent_TYPE_ADDED, next)
	case !proto.Equal(prev, next):
		r.events.Publish(mriv1alpha1.MachineEvent_TYPE_MODIFIED, next)
	}
}

// unavailable is a downstream failure the caller retries.
func unavailable(what string, err error) error {
	return status.Errorf(codes.Unavailable, "broker runtime: %s: %v", what, err)
}

