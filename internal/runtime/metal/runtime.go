package metal

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/mutate"
	"github.com/anvil-dev/anvil/internal/runtime/console"
	"github.com/anvil-dev/anvil/internal/runtime/kit"
)

// Runtime is the metal runtime. Create it with New, call Run, Close it to stop.
type Runtime struct {
	// Base answers Version, ListMachines and WatchEvents from the machines made from the
	// Hosts (by Host name), and holds Run's lifecycle.
	kit.Base[hostView]
	// Fixed answers the hot-plug calls: a server's disks and NICs are its own.
	mutate.Fixed

	opts     Options
	listener net.Listener
	imageURL string
	queue    workqueue.TypedRateLimitingInterface[string]

	// background are the prefetches under way; Close waits for them.
	background sync.WaitGroup

	// claimMu makes this process's creates claim one at a time, so that two never race
	// for the same first candidate.
	claimMu sync.Mutex

	mu sync.Mutex
	// hosts is every Host of the namespace as last seen, from the informer or from this
	// runtime's own writes, whichever is newer. Stored Hosts are never modified.
	hosts map[string]*metalv1alpha1.Host
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
	started    bool
	// closed: Close began; no prefetch starts after it (checked with background.Add under mu).
	closed bool

	// consoles are the servers' serial console sessions (nil: no Options.ConsoleDir), and
	// consoleServer answers the console calls from them.
	consoles      *serialConsoles
	consoleServer *console.Server
	endConsoles   context.CancelFunc
}

// hostView is what the runtime keeps beside the machine a Host carries.
type hostView struct {
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
		Base: kit.NewBase[hostView]("metal", opts.PoolName, "reading its Hosts"),
		opts: opts, listener: l, imageURL: opts.ImageURL,
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		hosts:  map[string]*metalv1alpha1.Host{},
		drives: map[string][]byte{}, observed: map[string]int64{}, writing: map[string]bool{},
		vacated: map[string]vacated{}, projected: map[string]string{}, prefetched: map[string]bool{},
	}
	r.Fixed = mutate.Fixed{NoVolumeHotplug: noVolumeHotplug, NoNICHotplug: noNICHotplug, Machine: r.Base.Machine}
	r.endConsoles = func() {}
	if opts.ConsoleDir != "" {
		if err := os.MkdirAll(opts.ConsoleDir, 0o700); err != nil {
			l.Close()
			return nil, fmt.Errorf("metal runtime: console logs: %w", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r.consoles = &serialConsoles{dir: opts.ConsoleDir, ctx: ctx, sessions: map[string]*serialSession{}, none: map[string]string{}}
		r.consoleServer = &console.Server{Lookup: r.lookupConsole}
		r.endConsoles = cancel
		go console.RecordTimes(ctx, time.Second, r.sessionLogs)
	}
	if r.imageURL == "" {
		r.imageURL = "http://" + l.Addr().String()
	}
	return r, nil
}

// ImageURL is the base URL of the image server.
func (r *Runtime) ImageURL() string { return r.imageURL }

// Close stops Run, the image server and event streams. Hosts keep their machines; a new
// Runtime on the same namespace reports them again.
func (r *Runtime) Close() {
	r.Stop(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.Views.Close()
		r.endConsoles()
		r.queue.ShutDown()
		r.background.Wait()
	}, func() { r.listener.Close() }) // Run never will
}

// machine returns a copy of the machine with id and the name of its Host, or NOT_FOUND.
func (r *Runtime) machine(id string) (*mriv1alpha1.Machine, string, error) {
	m, host, _, err := r.Views.ByID(id)
	return m, host, err
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
	next, view := r.viewLocked(r.hosts[name])
	if next != nil {
		next.Status.Console = r.serialLocked(name, r.hosts[name], next)
	} else if r.consoles != nil {
		r.dropSerialLocked(name)
	}
	if oldID, old, ok := r.Views.Peek(name); ok && next.GetMetadata().GetId() != oldID {
		delete(r.observed, oldID)
		delete(r.drives, old.drive)
		r.forgetSerialLocked(oldID)
	}
	if !r.Views.Set(name, next, view) {
		// Two Hosts carry one machine: only a claim made outside this runtime's rules
		// does that. Keep the first; the operators must release the other.
		_, first, _, _ := r.Views.ByID(next.GetMetadata().GetId())
		r.opts.Logger.Error(nil, "two Hosts claim one machine; ignoring the second", "machine", next.GetMetadata().GetId(), "host", first, "second", name)
	}
}

// viewLocked is the machine claiming h (nil: none, or no Host) and what is kept beside it.
// mu must be held.
func (r *Runtime) viewLocked(h *metalv1alpha1.Host) (*mriv1alpha1.Machine, hostView) {
	if h == nil {
		return nil, hostView{}
	}
	rec, spec, err := decodeRecord(h)
	if err != nil {
		// Only a hand edit breaks a record: leave the Host for its operators.
		r.opts.Logger.Error(err, "Host carries an unreadable machine record; not reporting it", "host", h.Name)
		return nil, hostView{}
	}
	if rec == nil {
		return nil, hostView{}
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
	return m, hostView{consumer: *h.Spec.ConsumerRef, drive: rec.drive()}
}
