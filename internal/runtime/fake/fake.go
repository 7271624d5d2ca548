package fake

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/mri/events"
	"github.com/anvil-dev/anvil/internal/runtime/console"
)

// Config shapes a fake pool.
type Config struct {
	// Name is reported by Version.
	Name string
	// Allocatable is what machines may use in total.
	Allocatable *mriv1alpha1.Resources
	// Images, when set, are the images the pool finds, by digest, each with the
	// architectures its index offers (none: the index does not say). A create of another
	// digest is IMAGE_NOT_FOUND, and of an image without the machine's architecture
	// WRONG_ARCHITECTURE, as a runtime reading a registry answers. Nil finds every image.
	Images map[string][]mriv1alpha1.Architecture
	// Architectures the pool runs; NativeArchitectures those of them it says it runs
	// natively (none by default: a fake runs nothing, so it claims no hardware).
	Architectures       []mriv1alpha1.Architecture
	NativeArchitectures []mriv1alpha1.Architecture
	// Networks are reported by Status as the pool's NIC networks.
	Networks []*mriv1alpha1.PoolNetwork
	// Latency is how long each step (boot, power change, attach, delete) takes, plus a
	// uniformly random Jitter. Zero makes every step complete inside the call.
	Latency, Jitter time.Duration
	// FailureRate is the probability that a mutating call fails with UNAVAILABLE.
	FailureRate float64
	// SilentFailureRate is the probability that a mutating call succeeds but its effect
	// is lost: a create that keeps nothing, or a step that never completes until the call
	// is repeated.
	SilentFailureRate float64
	// StateFile, when set, keeps the machines across restarts of the runtime.
	StateFile string
	// Seed makes latency and failures repeatable.
	Seed int64
}

// Runtime is the fake runtime. Create it with New.
type Runtime struct {
	mriv1alpha1.UnimplementedMachineRuntimeServer

	cfg Config
	mu  sync.Mutex
	// machines by id; byUID maps the machine-uid label to an id.
	machines map[string]*mriv1alpha1.Machine
	byUID    map[string]string
	nextID   uint64
	rng      *rand.Rand
	// events is published to under mu, so a new stream's machines and events line up.
	events *events.Hub
	closed bool
	// consoles are the machines' console logs, by id (console.go).
	consoles      map[string]*console.MemoryLog
	consoleServer *console.Server
}

// New returns a runtime, with the machines of cfg.StateFile when it exists.
func New(cfg Config) (*Runtime, error) {
	if cfg.Name == "" {
		cfg.Name = "fake"
	}
	if len(cfg.Architectures) == 0 {
		return nil, fmt.Errorf("fake runtime: at least one architecture is needed")
	}
	if cfg.Allocatable == nil {
		return nil, fmt.Errorf("fake runtime: allocatable resources are needed")
	}
	r := &Runtime{
		cfg: cfg, machines: map[string]*mriv1alpha1.Machine{}, byUID: map[string]string{},
		rng: rand.New(rand.NewSource(cfg.Seed)), events: events.NewHub(watchBuffer),
	}
	r.consoleServer = &console.Server{Lookup: r.lookupConsole}
	if err := r.load(); err != nil {
		return nil, err
	}
	for id, m := range r.machines {
		// A console is kept in memory only: a machine running before the restart says
		// what was lost.
		if m.GetStatus().GetState() == mriv1alpha1.MachineState_MACHINE_STATE_RUNNING {
			fmt.Fprintf(r.consoleLocked(id), "fake machine %s: running (the runtime restarted; earlier output is not kept)\n", id)
		}
		// Steps interrupted by the restart are carried out now (CONTRACT.md R2).
		if unsettled(m) {
			r.scheduleSettle(id)
		}
	}
	return r, nil
}

// Close stops event streams; a restarted runtime is a new Runtime on the same StateFile.
func (r *Runtime) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.events.Close()
}

func (r *Runtime) Version(context.Context, *mriv1alpha1.VersionRequest) (*mriv1alpha1.VersionResponse, error) {
	return &mriv1alpha1.VersionResponse{RuntimeName: r.cfg.Name, RuntimeVersion: "0.1.0", MriVersion: "v1alpha1", Pool: r.cfg.Name}, nil
}

func (r *Runtime) Status(context.Context, *mriv1alpha1.StatusRequest) (*mriv1alpha1.StatusResponse, error) {
	resp := &mriv1alpha1.StatusResponse{
		Capacity: proto.Clone(r.cfg.Allocatable).(*mriv1alpha1.Resources), Allocatable: proto.Clone(r.cfg.Allocatable).(*mriv1alpha1.Resources),
		Architectures:       r.cfg.Architectures,
		NativeArchitectures: r.cfg.NativeArchitectures,
		Networks:            r.cfg.Networks,
		Addresses:           []*mriv1alpha1.Address{{Type: "Endpoint", Address: "fake://" + r.cfg.Name}},
	}
	for _, a := range r.cfg.Architectures {
		if !slices.Contains(r.cfg.NativeArchitectures, a) {
			resp.EmulationReasons = append(resp.EmulationReasons, &mriv1alpha1.EmulationReason{Architecture: a, Reason: "a fake pool claims no hardware for this architecture"})
		}
	}
	return resp, nil
}

func (r *Runtime) ListMachines(_ context.Context, req *mriv1alpha1.ListMachinesRequest) (*mriv1alpha1.ListMachinesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &mriv1alpha1.ListMachinesResponse{}
	for _, m := range r.machines {
		if mri.Lists(req, m) {
			resp.Machines = append(resp.Machines, proto.Clone(m).(*mriv1alpha1.Machine))
		}
	}
	return resp, nil
}

func (r *Runtime) CreateMachine(_ context.Context, req *mriv1alpha1.CreateMachineRequest) (*mriv1alpha1.CreateMachineResponse, error) {
	in := req.GetMachine()
	if err := mri.ValidateCreate(in); err != nil {
		return nil, err
	}
	uid := in.GetMetadata().GetLabels()[mri.LabelMachineUID]
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.byUID[uid]; ok {
		return &mriv1alpha1.CreateMachineResponse{Machine: proto.Clone(r.machines[id]).(*mriv1alpha1.Machine)}, nil
	}
	if !r.runsArchitecture(in.GetSpec().GetArchitecture()) {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE,
			"pool %s does not run %s", r.cfg.Name, in.GetSpec().GetArchitecture())
	}
	if err := r.admit(in.GetSpec().GetResources()); err != nil {
		return nil, err
	}
	if err := r.findImage(in.GetSpec()); err != nil {
		return nil, err
	}
	if err := r.injectFailure(); err != nil {
		return nil, err
	}
	r.nextID++
	id := r.cfg.Name + "-" + strconv.FormatUint(r.nextID, 10)
	m := &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{
			Id: id, Labels: in.GetMetadata().GetLabels(), Annotations: in.GetMetadata().GetAnnotations(),
			Generation: 1, CreatedAtUnixNano: time.Now().UnixNano(),
		},
		Spec:   proto.Clone(in.GetSpec()).(*mriv1alpha1.MachineSpec),
		Status: &mriv1alpha1.MachineStatus{State: mriv1alpha1.MachineState_MACHINE_STATE_PENDING, Architecture: in.GetSpec().GetArchitecture()},
	}
	out := proto.Clone(m).(*mriv1alpha1.Machine)
	if r.silentFailure() {
		return &mriv1alpha1.CreateMachineResponse{Machine: out}, nil // said yes, kept nothing
	}
	r.machines[id], r.byUID[uid] = m, id
	r.changed(mriv1alpha1.MachineEvent_TYPE_ADDED, m)
	r.stepLocked(id)
	return &mriv1alpha1.CreateMachineResponse{Machine: proto.Clone(r.machines[id]).(*mriv1alpha1.Machine)}, nil
}

func (r *Runtime) runsArchitecture(a mriv1alpha1.Architecture) bool {
	for _, have := range r.cfg.Architectures {
		if have == a {
			return true
		}
	}
	return false
}

// findImage refuses an image the pool does not find, or without the machine's
// architecture (CONTRACT.md E1).
func (r *Runtime) findImage(s *mriv1alpha1.MachineSpec) error {
	if r.cfg.Images == nil {
		return nil
	}
	img := s.GetImage().GetReference() + "@" + s.GetImage().GetDigest()
	archs, ok := r.cfg.Images[s.GetImage().GetDigest()]
	if !ok {
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_IMAGE_NOT_FOUND, "image %s not found", img)
	}
	if len(archs) > 0 && !slices.Contains(archs, s.GetArchitecture()) {
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE, "image %s offers %v, not %s", img, archs, s.GetArchitecture())
	}
	return nil
}

// admit refuses a machine that would take the pool past its allocatable (CONTRACT.md E5).
func (r *Runtime) admit(want *mriv1alpha1.Resources) error {
	used := &mriv1alpha1.Resources{Extended: map[string]int64{}}
	for _, m := range r.machines {
		if m.GetStatus().GetState() == mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED {
			continue
		}
		res := m.GetSpec().GetResources()
		used.MilliCpu += res.GetMilliCpu()
		used.MemoryBytes += res.GetMemoryBytes()
		for k, v := range res.GetExtended() {
			used.Extended[k] += v
		}
	}
	alloc := r.cfg.Allocatable
	// want > alloc-used, not used+want > alloc: a huge want would overflow the sum and fit.
	if want.GetMilliCpu() > alloc.GetMilliCpu()-used.MilliCpu {
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY, "pool %s: not enough cpu", r.cfg.Name)
	}
	if want.GetMemoryBytes() > alloc.GetMemoryBytes()-used.MemoryBytes {
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY, "pool %s: not enough memory", r.cfg.Name)
	}
	for k, v := range want.GetExtended() {
		if v > alloc.GetExtended()[k]-used.Extended[k] {
			return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY, "pool %s: not enough %s", r.cfg.Name, k)
		}
	}
	return nil
}

func (r *Runtime) injectFailure() error {
	if r.cfg.FailureRate > 0 && r.rng.Float64() < r.cfg.FailureRate {
		return status.Error(codes.Unavailable, "injected failure")
	}
	return nil
}

func (r *Runtime) silentFailure() bool {
	return r.cfg.SilentFailureRate > 0 && r.rng.Float64() < r.cfg.SilentFailureRate
}

// get returns the machine or NOT_FOUND; mu must be held.
func (r *Runtime) get(id string) (*mriv1alpha1.Machine, error) {
	m, ok := r.machines[id]
	if !ok {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "machine %q not found", id)
	}
	return m, nil
}
