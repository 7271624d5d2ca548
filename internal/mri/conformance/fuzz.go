package conformance

import (
	"context"
	"errors"
	"maps"
	"math"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// FuzzTarget is a runtime that Fuzz sends requests of fuzzed bytes to.
type FuzzTarget struct {
	// Served serves the runtime (Serve); Fuzz starts it once in each fuzzing process.
	Served *Served
	// Spec returns a spec the runtime accepts; the seeds' creates carry it. A runtime that
	// must never boot a guest while fuzzing gives one that cannot boot (an image that is
	// not an OS image, say).
	Spec func() *mriv1alpha1.MachineSpec
	// Labels are put on the seeds' machines, as Target.Labels.
	Labels map[string]string
	// Timeout bounds each call and the wait for a deleted machine to go.
	Timeout time.Duration
	// Check, when set, runs after each input once its machines are gone: the runtime's
	// own rules, such as no guest ever started.
	Check func(t *testing.T)
}

// fuzzCall is one MRI call on an existing machine, its request read from fuzzed bytes.
type fuzzCall struct {
	name string
	// do decodes raw into the request, aims it at id unless id is "", and sends it; ok is
	// false when raw is no such request (gRPC would refuse the bytes before the runtime).
	do func(ctx context.Context, c mriv1alpha1.MachineRuntimeClient, raw []byte, id string) (m *mriv1alpha1.Machine, err error, ok bool)
}

// mutations are the calls that change one machine. Each is idempotent (CONTRACT.md E3): a
// repeat succeeds and leaves the generation where the first call put it.
var mutations = []fuzzCall{
	mutation("UpdateMachinePower", mriv1alpha1.MachineRuntimeClient.UpdateMachinePower),
	mutation("RebootMachine", mriv1alpha1.MachineRuntimeClient.RebootMachine),
	mutation("UpdateMachineLabels", mriv1alpha1.MachineRuntimeClient.UpdateMachineLabels),
	mutation("AttachVolume", mriv1alpha1.MachineRuntimeClient.AttachVolume),
	mutation("DetachVolume", mriv1alpha1.MachineRuntimeClient.DetachVolume),
	mutation("AttachNetworkInterface", mriv1alpha1.MachineRuntimeClient.AttachNetworkInterface),
	mutation("DetachNetworkInterface", mriv1alpha1.MachineRuntimeClient.DetachNetworkInterface),
	mutation("ReimageMachine", mriv1alpha1.MachineRuntimeClient.ReimageMachine),
}

func mutation[Req any, P interface {
	*Req
	proto.Message
}, Resp interface{ GetMachine() *mriv1alpha1.Machine }](
	name string, method func(mriv1alpha1.MachineRuntimeClient, context.Context, P, ...grpc.CallOption) (Resp, error),
) fuzzCall {
	return fuzzCall{name: name, do: func(ctx context.Context, c mriv1alpha1.MachineRuntimeClient, raw []byte, id string) (*mriv1alpha1.Machine, error, bool) {
		req := P(new(Req))
		if proto.Unmarshal(raw, req) != nil {
			return nil, nil, false
		}
		if id != "" {
			r := req.ProtoReflect()
			r.Set(r.Descriptor().Fields().ByName("id"), protoreflect.ValueOfString(id))
		}
		resp, err := method(c, ctx, req)
		return resp.GetMachine(), err, true
	}}
}

// The other operations Fuzz makes after a create, numbered after the mutations.
const (
	opList = iota + 100
	opDelete
	opCreateAgain
	opCreateAnother
)

// fuzzOps is every operation Fuzz picks from with its op byte.
var fuzzOps = func() []int {
	ops := []int{opList, opDelete, opCreateAgain, opCreateAnother}
	for i := range mutations {
		ops = append(ops, i)
	}
	return ops
}()

// keepID in the op byte sends the fuzzed request's own id instead of the created machine's.
const keepID = 0x80

// Fuzz drives a runtime through the MRI, over its real gRPC server on a unix socket, with
// requests read from fuzzed protobuf bytes: a CreateMachine, then, when it made a machine,
// one more call picked by op (a mutation repeated, a reimage among them, a list, a delete,
// the same create again, or a second machine), then the machine's deletion. The runtime must hold to the contract
// for all of it: no call hangs or kills the server; every error is a gRPC status with an
// ErrorDetail (E1); a refused create makes nothing; the same uid gives the same machine
// (I2); a repeated call changes nothing (E3); machines never add up past allocatable (E5);
// a list returns what its request names; every machine made is deleted and gone in time.
func Fuzz(f *testing.F, target FuzzTarget) {
	c := target.Served.serve(f)
	seeds := func(uid string, spec *mriv1alpha1.MachineSpec) []byte {
		labels := map[string]string{mri.LabelMachineUID: uid, "suite": "fuzz"}
		maps.Copy(labels, target.Labels)
		return marshal(f, &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
			Metadata: &mriv1alpha1.ObjectMetadata{Labels: labels}, Spec: spec}})
	}
	create, another := seeds("fuzz-1", target.Spec()), seeds("fuzz-2", target.Spec())
	for op, req := range map[int]proto.Message{
		0: &mriv1alpha1.UpdateMachinePowerRequest{Power: mriv1alpha1.Power_POWER_OFF},
		1: &mriv1alpha1.RebootMachineRequest{Token: "r1"},
		2: &mriv1alpha1.UpdateMachineLabelsRequest{Labels: map[string]string{"team": "a"}},
		3: &mriv1alpha1.AttachVolumeRequest{Volume: &mriv1alpha1.Volume{Name: "data",
			Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: 1 << 20}}}},
		4: &mriv1alpha1.DetachVolumeRequest{Name: "root"},
		5: &mriv1alpha1.AttachNetworkInterfaceRequest{NetworkInterface: &mriv1alpha1.NetworkInterface{Name: "eth1", Network: "default"}},
		6: &mriv1alpha1.DetachNetworkInterfaceRequest{Name: "eth0"},
		7: &mriv1alpha1.ReimageMachineRequest{Image: target.Spec().GetImage(),
			FirstBoot: &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT, Data: []byte("#cloud-config\n")}},
		opList:   &mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{mri.LabelMachineUID: "fuzz-1"}},
		opDelete: &mriv1alpha1.DeleteMachineRequest{},
	} {
		f.Add(create, uint8(indexOf(f, op)), marshal(f, req))
	}
	f.Add(create, uint8(indexOf(f, 0)|keepID), marshal(f, &mriv1alpha1.UpdateMachinePowerRequest{Id: "no-such-machine", Power: mriv1alpha1.Power_POWER_ON}))
	f.Add(create, uint8(indexOf(f, opCreateAgain)), []byte(nil))
	f.Add(create, uint8(indexOf(f, opCreateAnother)), another)
	for _, spec := range []*mriv1alpha1.MachineSpec{nil, {}, {Power: 99, Architecture: 99}} {
		f.Add(seeds("fuzz-bad", spec), uint8(0), []byte(nil))
	}

	f.Fuzz(func(t *testing.T, rawCreate []byte, op uint8, raw []byte) {
		d := &fuzzDriver{t: t, c: c, timeout: target.Timeout}
		req := &mriv1alpha1.CreateMachineRequest{}
		if proto.Unmarshal(rawCreate, req) != nil {
			return
		}
		m := d.create(req)
		if m == nil {
			return
		}
		id := m.GetMetadata().GetId()
		switch which := fuzzOps[int(op&^keepID)%len(fuzzOps)]; which {
		case opList:
			d.list(raw, id)
		case opDelete:
			d.delete(id)
		case opCreateAgain:
			if again := d.create(req); again.GetMetadata().GetId() != id {
				t.Fatalf("CreateMachine with uid %q again gave machine %q, the first was %q (I2)", uid(req), again.GetMetadata().GetId(), id)
			}
		case opCreateAnother:
			second := &mriv1alpha1.CreateMachineRequest{}
			if proto.Unmarshal(raw, second) != nil || second.Machine == nil {
				break
			}
			if second.Machine.Metadata == nil {
				second.Machine.Metadata = &mriv1alpha1.ObjectMetadata{}
			}
			if second.Machine.Metadata.Labels == nil {
				second.Machine.Metadata.Labels = map[string]string{}
			}
			second.Machine.Metadata.Labels[mri.LabelMachineUID] = uid(req) + "-another"
			if m2 := d.create(second); m2 != nil {
				d.withinAllocatable()
				d.delete(m2.GetMetadata().GetId())
			}
		default:
			target := id
			if op&keepID != 0 {
				target = ""
			}
			d.mutate(mutations[which], raw, target, m.GetMetadata().GetGeneration())
		}
		d.delete(id)
		d.nothingLeft()
		if target.Check != nil {
			target.Check(t)
		}
	})
}

// indexOf is op's place in fuzzOps; a seed naming an operation not there is the suite's
// own mistake, reported as a failure of the fuzz target.
func indexOf(f *testing.F, op int) int {
	f.Helper()
	for i, o := range fuzzOps {
		if o == op {
			return i
		}
	}
	f.Fatalf("fuzz seed names operation %d, which is not in fuzzOps", op)
	return 0
}

func marshal(f *testing.F, m proto.Message) []byte {
	raw, err := proto.Marshal(m)
	if err != nil {
		f.Fatal(err)
	}
	return raw
}

func uid(req *mriv1alpha1.CreateMachineRequest) string {
	return req.GetMachine().GetMetadata().GetLabels()[mri.LabelMachineUID]
}

// fuzzDriver makes one fuzz input's calls and checks each answer against the contract.
type fuzzDriver struct {
	t       *testing.T
	c       mriv1alpha1.MachineRuntimeClient
	timeout time.Duration
}

func (d *fuzzDriver) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	d.t.Cleanup(cancel)
	return ctx
}

// refusal checks an error of call against E1: a status with an ErrorDetail, in time.
func (d *fuzzDriver) refusal(call string, err error) {
	d.t.Helper()
	if status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
		d.t.Fatalf("%s did not answer within %s", call, d.timeout)
	}
	if mri.ReasonOf(err) == mriv1alpha1.ErrorReason_ERROR_REASON_UNSPECIFIED {
		d.t.Fatalf("%s failed without an ErrorDetail (E1): %v", call, err)
	}
}

// create sends req and returns the machine made, or nil after checking the refusal made
// nothing under the request's uid.
func (d *fuzzDriver) create(req *mriv1alpha1.CreateMachineRequest) *mriv1alpha1.Machine {
	d.t.Helper()
	resp, err := d.c.CreateMachine(d.ctx(), req)
	if err != nil {
		d.refusal("CreateMachine", err)
		if u := uid(req); u != "" {
			if got := d.listed(&mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{mri.LabelMachineUID: u}}); len(got) != 0 {
				d.t.Fatalf("the refused CreateMachine (%v) left machine %s", err, got[0].GetMetadata().GetId())
			}
		}
		return nil
	}
	m := resp.GetMachine()
	id := m.GetMetadata().GetId()
	d.t.Cleanup(func() { d.remove(id) }) // when a check fails midway: the next input starts empty
	if id == "" || m.GetMetadata().GetLabels()[mri.LabelMachineUID] != uid(req) || m.GetMetadata().GetGeneration() < 1 {
		d.t.Fatalf("CreateMachine returned %v: want an id (I1), the uid label %q and a generation", m.GetMetadata(), uid(req))
	}
	if got := d.listed(&mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{mri.LabelMachineUID: uid(req)}}); len(got) != 1 || got[0].GetMetadata().GetId() != id {
		d.t.Fatalf("%d machines carry uid %q after its create, want machine %s alone (I2)", len(got), uid(req), id)
	}
	return m
}

func (d *fuzzDriver) listed(req *mriv1alpha1.ListMachinesRequest) []*mriv1alpha1.Machine {
	d.t.Helper()
	resp, err := d.c.ListMachines(d.ctx(), req)
	if err != nil {
		d.t.Fatalf("ListMachines(%v): %v", req, err)
	}
	return resp.GetMachines()
}

// mutate sends one call twice: the repeat must succeed and change nothing (E3), and a
// change moves the generation by one at most (E4).
func (d *fuzzDriver) mutate(call fuzzCall, raw []byte, id string, generation int64) {
	d.t.Helper()
	first, err, ok := call.do(d.ctx(), d.c, raw, id)
	if !ok {
		return
	}
	if err != nil {
		d.refusal(call.name, err)
		return
	}
	if g := first.GetMetadata().GetGeneration(); first.GetMetadata().GetId() == "" || g < generation || g > generation+1 {
		d.t.Fatalf("%s returned machine %v: want the machine after the call, generation %d or %d (E4)", call.name, first.GetMetadata(), generation, generation+1)
	}
	again, err, _ := call.do(d.ctx(), d.c, raw, id)
	if err != nil {
		d.t.Fatalf("%s repeated failed: %v (E3)", call.name, err)
	}
	if again.GetMetadata().GetGeneration() != first.GetMetadata().GetGeneration() {
		d.t.Fatalf("%s repeated moved the generation from %d to %d (E3)", call.name, first.GetMetadata().GetGeneration(), again.GetMetadata().GetGeneration())
	}
}

// list sends a fuzzed ListMachines: it returns exactly the machines its request names,
// the machine id among them when the request names it.
func (d *fuzzDriver) list(raw []byte, id string) {
	d.t.Helper()
	req := &mriv1alpha1.ListMachinesRequest{}
	if proto.Unmarshal(raw, req) != nil {
		return
	}
	all := d.listed(&mriv1alpha1.ListMachinesRequest{})
	got := d.listed(req)
	listed := map[string]bool{}
	for _, m := range got {
		if !mri.Lists(req, m) {
			d.t.Fatalf("ListMachines(%v) returned machine %v, which it does not name", req, m.GetMetadata())
		}
		listed[m.GetMetadata().GetId()] = true
	}
	for _, m := range all {
		if mri.Lists(req, m) && !listed[m.GetMetadata().GetId()] {
			d.t.Fatalf("ListMachines(%v) left out machine %v, which it names", req, m.GetMetadata())
		}
	}
}

// withinAllocatable checks E5: the machines not Terminated fit allocatable, summed
// without overflow.
func (d *fuzzDriver) withinAllocatable() {
	d.t.Helper()
	st, err := d.c.Status(d.ctx(), &mriv1alpha1.StatusRequest{})
	if err != nil {
		d.t.Fatalf("Status: %v", err)
	}
	alloc := st.GetAllocatable()
	var cpu, mem int64
	extended := map[string]int64{}
	sum := func(total *int64, v int64, what string) {
		if v < 0 || *total > math.MaxInt64-v {
			d.t.Fatalf("machines ask for %s %d beside %d: a negative or overflowing sum was admitted (E5)", what, v, *total)
		}
		*total += v
	}
	for _, m := range d.listed(&mriv1alpha1.ListMachinesRequest{}) {
		if m.GetStatus().GetState() == mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED {
			continue
		}
		res := m.GetSpec().GetResources()
		sum(&cpu, res.GetMilliCpu(), "milli_cpu")
		sum(&mem, res.GetMemoryBytes(), "memory_bytes")
		for k, v := range res.GetExtended() {
			t := extended[k]
			sum(&t, v, k)
			extended[k] = t
		}
	}
	if cpu > alloc.GetMilliCpu() || mem > alloc.GetMemoryBytes() {
		d.t.Fatalf("machines use %dm cpu and %d bytes, allocatable is %v (E5)", cpu, mem, alloc)
	}
	for k, v := range extended {
		if v > alloc.GetExtended()[k] {
			d.t.Fatalf("machines use %d of %s, allocatable is %d (E5)", v, k, alloc.GetExtended()[k])
		}
	}
}

// delete deletes machine id (a repeat succeeds, or finds it gone: E3) and waits for it to go.
func (d *fuzzDriver) delete(id string) {
	d.t.Helper()
	for range 2 {
		if _, err := d.c.DeleteMachine(d.ctx(), &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil && !mri.IsNotFound(err) {
			d.t.Fatalf("DeleteMachine %s: %v", id, err)
		}
	}
	deadline := time.Now().Add(d.timeout)
	for len(d.listed(&mriv1alpha1.ListMachinesRequest{Id: id})) > 0 {
		if time.Now().After(deadline) {
			d.t.Fatalf("machine %s still there %s after its deletion", id, d.timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// remove deletes machine id and waits a while for it to go, checking nothing: the
// clean-up of an input that failed.
func (d *fuzzDriver) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	if _, err := d.c.DeleteMachine(ctx, &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil {
		return
	}
	for ctx.Err() == nil {
		if resp, err := d.c.ListMachines(ctx, &mriv1alpha1.ListMachinesRequest{Id: id}); err != nil || len(resp.GetMachines()) == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// nothingLeft checks that the input's machines are all gone, so the next input starts on
// an empty runtime.
func (d *fuzzDriver) nothingLeft() {
	d.t.Helper()
	if left := d.listed(&mriv1alpha1.ListMachinesRequest{}); len(left) > 0 {
		d.t.Fatalf("%d machines left after deleting every machine made, first %v", len(left), left[0].GetMetadata())
	}
}
