package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
)

// upstream is an upstream machine of uid with cloud-init data, labelled as the poollet
// labels it.
func upstream(uid string) *mriv1alpha1.Machine {
	s := spec()
	s.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT, Data: []byte("#cloud-config\n")}
	return &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{
		mri.LabelMachineUID: uid, "anvil.dev/machine-namespace": "tenant", "anvil.dev/machine-name": "web"}}, Spec: s}
}

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantReason(t *testing.T, err error, code codes.Code, reason mriv1alpha1.ErrorReason, msg string) {
	t.Helper()
	if status.Code(err) != code || mri.ReasonOf(err) != reason || !strings.Contains(mri.MessageOf(err), msg) {
		t.Fatalf("got %v; want %s/%s saying %q", err, code, reason, msg)
	}
}

// secretExists reports whether the site holds a Secret of name.
func (s *site) secretExists(t *testing.T, name string) bool {
	t.Helper()
	err := env.Client.Get(bg(t), client.ObjectKey{Namespace: s.ns, Name: name}, &corev1.Secret{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never %s", what)
		}
	}
}

// TestCreateWritesTheDownstreamObjects: the Machine and Secret are named by the uid,
// labelled for the broker, the Machine carries the record, and the downstream runs it.
func TestCreateWritesTheDownstreamObjects(t *testing.T) {
	s := newSite(t, "create")
	r := s.mustStart(t)
	uid := "8f4a3d0e-0000-4000-8000-000000000001"
	resp, err := r.CreateMachine(bg(t), &mriv1alpha1.CreateMachineRequest{Machine: upstream(uid)})
	if err != nil {
		t.Fatal(err)
	}
	dm := &computev1alpha1.Machine{}
	if err := env.Client.Get(bg(t), client.ObjectKey{Namespace: s.ns, Name: uid}, dm); err != nil {
		t.Fatal(err)
	}
	if string(dm.UID) != resp.Machine.Metadata.Id || dm.Labels[mapping.LabelPool] != "create" || dm.Labels[mapping.LabelUpstreamUID] != uid ||
		dm.Annotations[mapping.AnnotationUpstream] != "tenant/web" || dm.Spec.UserDataRef == nil || dm.Spec.UserDataRef.Name != uid {
		t.Fatalf("downstream Machine = %+v", dm.ObjectMeta)
	}
	sec := &corev1.Secret{}
	if err := env.Client.Get(bg(t), client.ObjectKey{Namespace: s.ns, Name: uid}, sec); err != nil || string(sec.Data["userData"]) != "#cloud-config\n" {
		t.Fatalf("first-boot Secret: %v %v", err, sec.Data)
	}
	eventually(t, "ran downstream", func() bool {
		l, err := r.ListMachines(bg(t), &mriv1alpha1.ListMachinesRequest{Id: resp.Machine.Metadata.Id})
		return err == nil && len(l.Machines) == 1 && l.Machines[0].Status.State == mriv1alpha1.MachineState_MACHINE_STATE_RUNNING &&
			l.Machines[0].Status.ObservedGeneration == 1 && string(l.Machines[0].Spec.FirstBoot.Data) == "#cloud-config\n"
	})
}

// TestCreateRefusedDownstreamRollsBack: a Machine the downstream API refuses (a hostname
// its CRD does not take) is INVALID with the downstream's message, and the Secret written
// before it is gone.
func TestCreateRefusedDownstreamRollsBack(t *testing.T) {
	s := newSite(t, "rollback")
	r := s.mustStart(t)
	m := upstream("8f4a3d0e-0000-4000-8000-000000000002")
	m.Spec.Hostname = strings.Repeat("h", 64)
	_, err := r.CreateMachine(bg(t), &mriv1alpha1.CreateMachineRequest{Machine: m})
	wantReason(t, err, codes.InvalidArgument, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "hostname")
	if s.secretExists(t, "8f4a3d0e-0000-4000-8000-000000000002") {
		t.Fatal("the first-boot Secret of a Machine the downstream refused is still there")
	}
}

// TestCreateRefusesWhatCannotCrossABroker: before anything is written downstream.
func TestCreateRefusesWhatCannotCrossABroker(t *testing.T) {
	s := newSite(t, "refuse")
	r := s.mustStart(t)
	for i, tc := range []struct {
		name   string
		mut    func(*mriv1alpha1.MachineSpec)
		code   codes.Code
		reason mriv1alpha1.ErrorReason
		msg    string
	}{
		{"a volume by handle", func(s *mriv1alpha1.MachineSpec) {
			s.Volumes = append(s.Volumes, &mriv1alpha1.Volume{Name: "shared", Source: &mriv1alpha1.Volume_Handle{Handle: "tenant/shared"}})
		}, codes.InvalidArgument, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "cannot cross a broker"},
		{"a class of another size downstream", func(s *mriv1alpha1.MachineSpec) { s.Resources.MilliCpu = 2000 },
			codes.InvalidArgument, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "cpu 2000m upstream, 1000m downstream"},
		{"a class the downstream lacks", func(s *mriv1alpha1.MachineSpec) { s.Class = "huge" },
			codes.InvalidArgument, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "class huge does not exist downstream"},
		{"an architecture no downstream pool runs", func(s *mriv1alpha1.MachineSpec) { s.Architecture = mriv1alpha1.Architecture_ARCHITECTURE_S390X },
			codes.FailedPrecondition, mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE, "runs s390x"},
		{"natively, on a pool that only emulates", func(s *mriv1alpha1.MachineSpec) { s.Placement = &mriv1alpha1.Placement{NativeOnly: true} },
			codes.FailedPrecondition, mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE, "runs amd64 natively"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid := fmt.Sprintf("8f4a3d0e-0000-4000-8000-1000000000%02d", i)
			m := upstream(uid)
			tc.mut(m.Spec)
			_, err := r.CreateMachine(bg(t), &mriv1alpha1.CreateMachineRequest{Machine: m})
			wantReason(t, err, tc.code, tc.reason, tc.msg)
			if s.secretExists(t, uid) {
				t.Fatal("a refused create wrote a Secret")
			}
		})
	}
}

// TestDeleteReportsTerminatingUntilTheDownstreamMachineIsGone: a downstream finalizer
// holds the Machine; the machine stays listed (Terminating) and its Secret stays until
// the Machine is gone, then both go.
func TestDeleteReportsTerminatingUntilTheDownstreamMachineIsGone(t *testing.T) {
	s := newSite(t, "delete")
	r := s.mustStart(t)
	uid := "8f4a3d0e-0000-4000-8000-000000000003"
	resp, err := r.CreateMachine(bg(t), &mriv1alpha1.CreateMachineRequest{Machine: upstream(uid)})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Machine.Metadata.Id
	const hold = "test.anvil.dev/hold"
	dm := &computev1alpha1.Machine{}
	if err := env.Client.Get(bg(t), client.ObjectKey{Namespace: s.ns, Name: uid}, dm); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(dm.DeepCopy())
	controllerutil.AddFinalizer(dm, hold)
	if err := env.Client.Patch(bg(t), dm, patch); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second is a delete of a machine being deleted (E3)
		if _, err := r.DeleteMachine(bg(t), &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil {
			t.Fatal(err)
		}
	}
	list := func() []*mriv1alpha1.Machine {
		l, err := r.ListMachines(bg(t), &mriv1alpha1.ListMachinesRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		return l.Machines
	}
	eventually(t, "reported Terminating", func() bool {
		l := list()
		return len(l) == 1 && l[0].Status.State == mriv1alpha1.MachineState_MACHINE_STATE_TERMINATING && l[0].Metadata.DeletedAtUnixNano != 0
	})
	time.Sleep(time.Second) // the downstream poollet lets its runtime machine go meanwhile
	if len(list()) != 1 || !s.secretExists(t, uid) {
		t.Fatal("the machine or its Secret went before the downstream Machine")
	}
	if err := env.Client.Get(bg(t), client.ObjectKey{Namespace: s.ns, Name: uid}, dm); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(dm.DeepCopy())
	controllerutil.RemoveFinalizer(dm, hold)
	if err := env.Client.Patch(bg(t), dm, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gone with its Secret", func() bool { return len(list()) == 0 && !s.secretExists(t, uid) })
	_, err = r.DeleteMachine(bg(t), &mriv1alpha1.DeleteMachineRequest{Id: id})
	wantReason(t, err, codes.NotFound, mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "not found")
}

// TestRestartAdoptsAndSweeps: a restarted broker lists its machines with their ids and
// specs, leaves another broker's Machine alone, and deletes its own Secret that no
// Machine and no create holds.
func TestRestartAdoptsAndSweeps(t *testing.T) {
	s := newSite(t, "adopt")
	r := s.mustStart(t)
	uid := "8f4a3d0e-0000-4000-8000-000000000004"
	resp, err := r.CreateMachine(bg(t), &mriv1alpha1.CreateMachineRequest{Machine: upstream(uid)})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	stray := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "stray", Labels: mapping.ObjectLabels("adopt", "stray")}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "other", Labels: mapping.ObjectLabels("another-broker", "other")}}
	for _, o := range []client.Object{stray, other} {
		if err := env.Client.Create(bg(t), o); err != nil {
			t.Fatal(err)
		}
	}
	r2 := s.mustStart(t)
	l, err := r2.ListMachines(bg(t), &mriv1alpha1.ListMachinesRequest{})
	if err != nil || len(l.Machines) != 1 || l.Machines[0].Metadata.Id != resp.Machine.Metadata.Id ||
		string(l.Machines[0].Spec.FirstBoot.Data) != "#cloud-config\n" || l.Machines[0].Metadata.Labels["anvil.dev/machine-name"] != "web" {
		t.Fatalf("after a restart: %v %v", l, err)
	}
	eventually(t, "swept the stray Secret", func() bool { return !s.secretExists(t, "stray") })
	if !s.secretExists(t, "other") || !s.secretExists(t, uid) {
		t.Fatal("the sweep deleted a Secret it had no business with")
	}
	again, err := r2.CreateMachine(bg(t), &mriv1alpha1.CreateMachineRequest{Machine: upstream(uid)})
	if err != nil || again.Machine.Metadata.Id != resp.Machine.Metadata.Id {
		t.Fatalf("a create retried after the restart: %v, %v; want machine %s (I2)", again, err, resp.Machine.Metadata.Id)
	}
}

// TestStatusIsTheDownstreamPools: the fake pool's capacity, architectures and classes,
// nothing native; allocatable is what the pool has less what others' Machines hold
// (status.allocated less the broker's own): a machine of the broker, once the downstream
// counts it, leaves the broker's allocatable as it was, since the upstream scheduler
// subtracts it itself.
func TestStatusIsTheDownstreamPools(t *testing.T) {
	s := newSite(t, "status")
	r := s.mustStart(t)
	// want is the pool's allocatable cpu less what others hold, when the broker holds own.
	want := func(own int64) int64 {
		p := &computev1alpha1.MachinePool{}
		if err := env.Client.Get(bg(t), client.ObjectKey{Name: downstreamPool}, p); err != nil {
			t.Fatal(err)
		}
		alloc, held := p.Status.Allocatable[corev1.ResourceCPU], p.Status.Allocated[corev1.ResourceCPU]
		return alloc.MilliValue() - max(held.MilliValue()-own, 0)
	}
	var st *mriv1alpha1.StatusResponse
	eventually(t, "reported the pool", func() bool {
		var err error
		st, err = r.Status(bg(t), &mriv1alpha1.StatusRequest{})
		return err == nil && st.Allocatable.GetMilliCpu() == want(0)
	})
	if st.Capacity.MilliCpu != 64000 || st.Capacity.MemoryBytes != 64<<30 || len(st.Architectures) != 2 ||
		len(st.NativeArchitectures) != 0 || !slices.Contains(st.SupportedClasses, "small") {
		t.Fatalf("Status = %v", st)
	}
	resp, err := r.CreateMachine(bg(t), &mriv1alpha1.CreateMachineRequest{Machine: upstream("8f4a3d0e-0000-4000-8000-000000000005")})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "ran downstream", func() bool {
		l, err := r.ListMachines(bg(t), &mriv1alpha1.ListMachinesRequest{Id: resp.Machine.Metadata.Id})
		return err == nil && len(l.Machines) == 1 && l.Machines[0].Status.State == mriv1alpha1.MachineState_MACHINE_STATE_RUNNING
	})
	eventually(t, "reported the pool, its own machine not subtracted", func() bool {
		st, err := r.Status(bg(t), &mriv1alpha1.StatusRequest{})
		return err == nil && st.Allocatable.GetMilliCpu() == want(1000)
	})
}
