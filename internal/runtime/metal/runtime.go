package metal

import (
	"context"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/client-go/util/workqueue"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/events"
)

// Version of this runtime, reported by the Version call.
const Version = "0.1.0"

// watchBuffer is how many events a stream may fall behind before it is dropped and its
// client reconnects for the full list.
const watchBuffer = 1024

// Runtime is the metal runtime. Create it with New, call Run, Close it to stop.
type Runtime struct {
	mriv1alpha1.UnimplementedMachineRuntimeServer

	opts     Options
	listener net.Listener
	imageURL string
	queue    workqueue.TypedRateLimitingInterface[string]

	// closing ends Run; ready is closed once Run has read every Host and config drive.
	closing context.Context
	close   context.CancelFunc
	ready   chan struct{}
	runDone chan struct{}

	// background are the prefetches under way; Close waits for them.
	background sync.WaitGroup

	// claimMu makes this process's creates claim one at a time, so that two never race
	// for the same first candidate.
	claimMu sync.Mutex

	mu sync.Mutex
	// hosts is every Host of the namespace as last seen, from the informer or from this
	// runtime's own writes, whichever is newer. Stored Hosts are never modified.
	hosts map[string]*metalv1alpha1.Host
	// machines by id, as last published, and the id held by each Host.
	machines map[string]*machineView
	byHost   map[string]string
	// drives are the user data of the config-drive Secrets, by Secret name: a machine
	// reports its record's (its spec's first-boot data).
	drives map[string][]byte
	// observed is each machine's last settled generation (CONTRACT.md S1).
	observed map[string]int64
	// writing are config-drive Secrets written for a Host update under way (a claim, a
	// reimage): they exist before any Host names them.
	writing map[string]bool
	// vacated are machines whose Host was deleted, for their Secret and HardwareData to go.
	vacated map[string]vacated
	// projected is the resourceVersion of the HardwareData last copied for each machine.
	projected map[string]string
	// prefetched are disks whose pull into the cache was started.
	prefetched map[string]bool
	events     *events.Hub
	started    bool
	running    bool
	closed     bool
}

// machineView is a machine as reported, and the Host it claims.
type machineView struct {
	host    string
	machine *mriv1alpha1.Machine
	// drive is the machine's config-drive Secret.
	drive string
	// consumer is the Host's consumerRef when the view was made.
	consumer metalv1alpha1.ConsumerReference
}

// vacated is what is left to remove of a machine whose Host went away.
type vacated struct {
	id, drive string
	consumer  metalv1alpha1.ConsumerReference
}

// New makes a runtime and opens its image server's listener; Run serves.
func New(opts Options) (*Runtime, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", opts.ImageListen)
	if err != nil {
		return nil, fmt.Errorf("metal runtime: image server: %w", err)
	}
	r := &Runtime{
		opts: opts, listener: l, imageURL: opts.ImageURL,
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		ready:    make(chan struct{}),
		runDone:  make(chan struct{}),
		hosts:    map[string]*metalv1alpha1.Host{},
		machines: map[string]*machineView{}, byHost: map[string]string{},
		drives: map[string][]byte{}, observed: map[string]int64{}, writing: map[string]bool{},
		vacated: map[string]vacated{}, projected: map[string]string{}, prefetched: map[string]bool{},
		events: events.NewHub(watchBuffer),
	}
	if r.imageURL == "" {
		r.imageURL = "http://" + l.Addr().String()
	}
	r.closing, r.close = context.WithCancel(context.Background())
	return r, nil
}

// Ready is closed once Run has read the Hosts and config drives; calls made before wait
// for it.
func (r *Runtime) Ready() <-chan struct{} { return r.ready }

// ImageURL is the base URL of the image server.
func (r *Runtime) ImageURL() string { return r.imageURL }

// Close stops Run, the image server and event streams. Hosts keep their machines; a new
// Runtime on the same namespace reports them again.
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
	r.queue.ShutDown()
	r.background.Wait()
	if running {
		<-r.runDone
	} else {
		r.listener.Close() // Run never will
	}
}

// awaitReady holds a call until Run has read the Hosts: before that, every answer would
// be about an empty pool.
func (r *Runtime) awaitReady(ctx context.Context) error {
	select {
	case <-r.ready:
		return nil
	case <-r.closing.Done():
		return status.Error(codes.Unavailable, "metal runtime: closed")
	case <-ctx.Done():
		return status.Error(codes.Unavailable, "metal runtime: still reading its Hosts")
	}
}

func (r *Runtime) Version(context.Context, *mriv1alpha1.VersionRequest) (*mriv1alpha1.VersionResponse, error) {
	return &mriv1alpha1.VersionResponse{RuntimeName: "metal/" + r.opts.PoolName, RuntimeVersion: Version, MriVersion: "v1alpha1", Pool: r.opts.PoolName}, nil
}

func (r *Runtime) ListMachines(ctx context.Context, req *mriv1alpha1.ListMachinesRequest) (*mriv1alpha1.ListMachinesResponse, error) {
	if err := r.awaitReady(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &mriv1alpha1.ListMachinesResponse{}
	for _, v := range r.machines {
		if mri.Lists(req, v.machine) {
			resp.Machines = append(resp.Machines, proto.Clone(v.machine).(*mriv1alpha1.Machine))
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
	current := make([]*mriv1alpha1.Machine, 0, len(r.machines))
	for _, v := range r.machines {
		current = append(current, v.machine)
	}
	sub := r.events.Subscribe(current)
	r.mu.Unlock()
	return sub.Stream(stream)
}

// machine returns a copy of the machine with id, or NOT_FOUND.
func (r *Runtime) machine(id string) (*mriv1alpha1.Machine, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.machines[id]
	if !ok {
		return nil, "", mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "machine %q not found", id)
	}
	return proto.Clone(v.machine).(*mriv1alpha1.Machine), v.host, nil
}

// observeLocked keeps h unless the Host already held is newer: an informer event may
// arrive after this runtime's own write of a later version. mu must be held.
func (r *Runtime) observeLocked(h *metalv1alpha1.Host) {
	if have, ok := r.hosts[h.Name]; ok && mri.NewerResourceVersion(have.ResourceVersion, h.ResourceVersion) {
		return
	}
	r.hosts[h.Name] = h
	if r.started {
		r.refreshLocked(h.Name)
	}
}

// assume records a Host this runtime just wrote, so that its next answers include the
// write before the informer delivers it (as the scheduler's assume cache does).
func (r *Runtime) assume(h *metalv1alpha1.Host) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observeLocked(h)
}

// refreshLocked recomputes the machine of Host name and tells watchers what changed.
// mu must be held.
func (r *Runtime) refreshLocked(name string) {
	var next *machineView
	if h := r.hosts[name]; h != nil {
		next = r.viewLocked(h)
	}
	if oldID, ok := r.byHost[name]; ok && (next == nil || next.machine.Metadata.Id != oldID) {
		old := r.machines[oldID]
		delete(r.machines, oldID)
		delete(r.byHost, name)
		delete(r.observed, oldID)
		delete(r.drives, old.drive)
		r.events.Publish(mriv1alpha1.MachineEvent_TYPE_DELETED, old.machine)
	}
	if next == nil {
		return
	}
	id := next.machine.Metadata.Id
	prev, had := r.machines[id]
	if had && prev.host != name {
		// Two Hosts carry one machine: only a claim made outside this runtime's rules
		// does that. Keep the first; the operators must release the other.
		r.opts.Logger.Error(nil, "two Hosts claim one machine; ignoring the second", "machine", id, "host", prev.host, "second", name)
		return
	}
	r.machines[id], r.byHost[name] = next, id
	switch {
	case !had:
		r.events.Publish(mriv1alpha1.MachineEvent_TYPE_ADDED, next.machine)
	case !proto.Equal(prev.machine, next.machine):
		r.events.Publish(mriv1alpha1.MachineEvent_TYPE_MODIFIED, next.machine)
	}
}

// viewLocked is the machine claiming h, or nil. mu must be held.
func (r *Runtime) viewLocked(h *metalv1alpha1.Host) *machineView {
	rec, spec, err := decodeRecord(h)
	if err != nil {
		// Only a hand edit breaks a record: leave the Host for its operators.
		r.opts.Logger.Error(err, "Host carries an unreadable machine record; not reporting it", "host", h.Name)
		return nil
	}
	if rec == nil {
		return nil
	}
	if spec.FirstBoot != nil {
		spec.FirstBoot.Data = r.drives[rec.drive()]
	}
	st, settled := machineStatus(h, rec, spec)
	if settled && rec.Generation > r.observed[rec.ID] {
		r.observed[rec.ID] = rec.Generation
	}
	st.ObservedGeneration = r.observed[rec.ID]
	m := &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{
			Id: rec.ID, Labels: rec.Labels, Annotations: rec.Annotations, Generation: rec.Generation,
			CreatedAtUnixNano: rec.CreatedAt, DeletedAtUnixNano: rec.DeletedAt,
		},
		Spec:   spec,
		Status: st,
	}
	return &machineView{host: h.Name, machine: m, consumer: *h.Spec.ConsumerRef, drive: rec.drive()}
}
