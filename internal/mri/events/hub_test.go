package events

import (
	"context"
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// recorder is a WatchEvents stream that keeps what it is sent; sendErr fails every send.
type recorder struct {
	grpc.ServerStream
	ctx     context.Context
	sent    []*mriv1alpha1.MachineEvent
	sendErr error
}

func (r *recorder) Context() context.Context { return r.ctx }

func (r *recorder) Send(ev *mriv1alpha1.MachineEvent) error {
	if r.sendErr != nil {
		return r.sendErr
	}
	r.sent = append(r.sent, ev)
	return nil
}

func machine(id string) *mriv1alpha1.Machine {
	return &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Id: id}}
}

// got renders events as "TYPE id" for comparison.
func got(evs []*mriv1alpha1.MachineEvent) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type.String()+" "+ev.Machine.Metadata.Id)
	}
	return out
}

const (
	added    = mriv1alpha1.MachineEvent_TYPE_ADDED
	modified = mriv1alpha1.MachineEvent_TYPE_MODIFIED
	deleted  = mriv1alpha1.MachineEvent_TYPE_DELETED
)

// A stream gets the machines it started with, then every change, in order, and ends
// without error when the hub closes.
func TestStreamSendsInitialThenPublished(t *testing.T) {
	h := NewHub(8)
	a := machine("a")
	sub := h.Subscribe([]*mriv1alpha1.Machine{a})
	a.Metadata.Id = "changed after subscribing"
	h.Publish(modified, machine("a"))
	h.Publish(added, machine("b"))
	h.Publish(deleted, machine("b"))
	h.Close()
	rec := &recorder{ctx: context.Background()}
	if err := sub.Stream(rec); err != nil {
		t.Fatal(err)
	}
	want := []string{"TYPE_ADDED a", "TYPE_MODIFIED a", "TYPE_ADDED b", "TYPE_DELETED b"}
	if !slices.Equal(got(rec.sent), want) {
		t.Fatalf("sent %v, want %v", got(rec.sent), want)
	}
}

func TestPublishCopiesTheMachine(t *testing.T) {
	h := NewHub(1)
	sub := h.Subscribe(nil)
	m := machine("a")
	h.Publish(modified, m)
	m.Metadata.Id = "b"
	h.Close()
	rec := &recorder{ctx: context.Background()}
	if err := sub.Stream(rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.sent) != 1 || rec.sent[0].Machine.Metadata.Id != "a" {
		t.Fatalf("sent %v, want the machine as it was published", got(rec.sent))
	}
}

// A stream that falls behind is dropped: it sends what it holds and ends, and the hub
// forgets it, while the others go on.
func TestSlowStreamIsDropped(t *testing.T) {
	h := NewHub(1)
	slow := h.Subscribe(nil)
	h.Publish(modified, machine("a"))
	fast := h.Subscribe(nil)
	h.Publish(modified, machine("b"))
	rec := &recorder{ctx: context.Background()}
	if err := slow.Stream(rec); err != nil {
		t.Fatal(err)
	}
	if want := []string{"TYPE_MODIFIED a"}; !slices.Equal(got(rec.sent), want) {
		t.Fatalf("slow stream sent %v, want %v", got(rec.sent), want)
	}
	if len(h.subs) != 1 {
		t.Fatalf("%d subscriptions left, want only the fast one", len(h.subs))
	}
	h.Close()
	rec = &recorder{ctx: context.Background()}
	if err := fast.Stream(rec); err != nil {
		t.Fatal(err)
	}
	if want := []string{"TYPE_MODIFIED b"}; !slices.Equal(got(rec.sent), want) {
		t.Fatalf("fast stream sent %v, want %v", got(rec.sent), want)
	}
}

func TestSubscribeAfterCloseEndsAtOnce(t *testing.T) {
	h := NewHub(8)
	h.Close()
	h.Close()
	sub := h.Subscribe([]*mriv1alpha1.Machine{machine("a")})
	h.Publish(modified, machine("a"))
	rec := &recorder{ctx: context.Background()}
	if err := sub.Stream(rec); err != nil || len(rec.sent) != 0 {
		t.Fatalf("a stream of a closed hub sent %v, %v; want nothing", got(rec.sent), err)
	}
}

func TestClientGoneEndsTheSubscription(t *testing.T) {
	h := NewHub(8)
	sub := h.Subscribe(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sub.Stream(&recorder{ctx: ctx}); err != nil {
		t.Fatal(err)
	}
	if len(h.subs) != 0 {
		t.Fatalf("%d subscriptions left after the client went away", len(h.subs))
	}
	h.Publish(modified, machine("a")) // nobody to send to, and no channel closed twice
	h.Close()
}

func TestFailedSendIsReturned(t *testing.T) {
	h := NewHub(8)
	sub := h.Subscribe([]*mriv1alpha1.Machine{machine("a")})
	broken := errors.New("broken pipe")
	if err := sub.Stream(&recorder{ctx: context.Background(), sendErr: broken}); !errors.Is(err, broken) {
		t.Fatalf("Stream = %v, want %v", err, broken)
	}
	if len(h.subs) != 0 {
		t.Fatalf("%d subscriptions left after a failed send", len(h.subs))
	}
}
