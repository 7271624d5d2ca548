package kit

import (
	"context"
	"strings"
	"testing"
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

func machine(id string, generation int64) *mriv1alpha1.Machine {
	return &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Id: id, Generation: generation}}
}

// stream records what a WatchEvents stream is sent.
type stream struct {
	mriv1alpha1.MachineRuntime_WatchEventsServer
	ctx  context.Context
	sent chan string
}

func (s *stream) Context() context.Context { return s.ctx }
func (s *stream) Send(ev *mriv1alpha1.MachineEvent) error {
	s.sent <- strings.TrimPrefix(ev.GetType().String(), "TYPE_") + " " + ev.GetMachine().GetMetadata().GetId()
	return nil
}

// Views publish what changed, once: a new machine ADDED, a changed one MODIFIED, an
// unchanged one nothing, a machine whose id changed DELETED then ADDED, one gone
// DELETED; a second object carrying an id already held is refused; readers get copies.
func TestViews(t *testing.T) {
	v := NewViews[string]()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &stream{ctx: ctx, sent: make(chan string, 16)}
	v.Set("host-a", machine("m1", 1), "drive-1") // before the stream: sent as its first ADDED
	go func() { _ = v.Watch(s) }()
	want := func(events ...string) {
		t.Helper()
		for _, e := range events {
			select {
			case got := <-s.sent:
				if got != e {
					t.Fatalf("event %q, want %q", got, e)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no event, want %q", e)
			}
		}
		select {
		case got := <-s.sent:
			t.Fatalf("unexpected event %q", got)
		case <-time.After(50 * time.Millisecond):
		}
	}
	want("ADDED m1")
	v.Set("host-a", machine("m1", 1), "drive-1")
	want()
	v.Set("host-a", machine("m1", 2), "drive-1")
	want("MODIFIED m1")
	if ok := v.Set("host-b", machine("m1", 2), "drive-2"); ok {
		t.Fatal("a second object took a machine id already held")
	}
	want()
	v.Set("host-a", machine("m2", 1), "drive-3")
	want("DELETED m1", "ADDED m2")
	m, key, extra, err := v.ByID("m2")
	if err != nil || key != "host-a" || extra != "drive-3" {
		t.Fatalf("ByID(m2) = %v %q %q %v", m, key, extra, err)
	}
	m.Metadata.Generation = 99 // a copy: the view is unchanged
	if again, _ := v.ByKey("host-a"); again.GetMetadata().GetGeneration() != 1 {
		t.Fatal("a reader's change reached the view")
	}
	if _, _, _, err := v.ByID("m1"); !mri.IsNotFound(err) {
		t.Fatalf("ByID of a machine gone: %v, want NOT_FOUND", err)
	}
	if got := v.List(&mriv1alpha1.ListMachinesRequest{}).GetMachines(); len(got) != 1 || got[0].GetMetadata().GetId() != "m2" {
		t.Fatalf("List = %v", got)
	}
	v.Set("host-a", nil, "")
	want("DELETED m2")
	if v.Len() != 0 {
		t.Fatalf("%d machines left", v.Len())
	}
}

// A call waits for Run's first read, and says what it waited for; Run runs once, not after
// Close; Close waits for Run, or releases what Run would have when it never ran.
func TestLifecycle(t *testing.T) {
	l := NewLifecycle("test runtime", "reading its things")
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.AwaitReady(short); err == nil || !strings.Contains(err.Error(), "test runtime: still reading its things") {
		t.Fatalf("before Open: %v", err)
	}
	ctx, end, err := l.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Begin(context.Background()); err == nil {
		t.Fatal("a second Run was let in")
	}
	l.Open()
	if err := l.AwaitReady(context.Background()); err != nil {
		t.Fatalf("after Open: %v", err)
	}
	ended := make(chan struct{})
	go func() {
		<-ctx.Done() // Run's context ends with Close
		time.Sleep(20 * time.Millisecond)
		close(ended)
		end()
	}()
	stopped := false
	if !l.Stop(func() { stopped = true }, func() { t.Error("never() called although Run ran") }) {
		t.Fatal("the first Stop did not close")
	}
	select {
	case <-ended:
	default:
		t.Fatal("Stop returned before Run did")
	}
	if !stopped || l.Stop(nil, nil) {
		t.Fatalf("stop ran %v; a second Stop closed again", stopped)
	}
	if _, _, err := l.Begin(context.Background()); err == nil {
		t.Fatal("Run was let in after Close")
	}

	idle := NewLifecycle("idle runtime", "reading")
	released := false
	idle.Stop(nil, func() { released = true })
	if !released {
		t.Fatal("Close of a runtime that never ran did not release what Run would have")
	}
	if err := idle.AwaitReady(context.Background()); err == nil || !strings.Contains(err.Error(), "idle runtime: closed") {
		t.Fatalf("after Close: %v", err)
	}
}
