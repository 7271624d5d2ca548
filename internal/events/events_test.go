package events

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

// A burst of Events past the process's limit: the apiserver receives the limit's burst,
// the rest are dropped and counted, and the recorder never blocks its caller. (Without the
// limit the apiserver received all 50.)
func TestEventsPastTheLimitAreDroppedAndCounted(t *testing.T) {
	ctx := context.Background()
	// A namespace of the test's own: the apiserver writes Events of its own into default
	// (ClusterIPNotAllocated at start), which a count there would include.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "events-burst"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "busy"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t, NewLimit(0.001, 5))

	before := testutil.ToFloat64(dropped.WithLabelValues("Burst"))
	start := time.Now()
	for i := range 50 {
		// Distinct actions: the events API folds Events alike in all but their note into
		// one series.
		rec.Normal(cm, "Burst", fmt.Sprint("Test", i), "event %d of 50 (100%% distinct)", i)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("50 Events took %s to record: the recorder must not wait for the apiserver", d)
	}
	if got := testutil.ToFloat64(dropped.WithLabelValues("Burst")) - before; got != 45 {
		t.Errorf("dropped %v Events, want 45 (50 past a burst of 5)", got)
	}
	var list corev1.EventList
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.List(ctx, &list, client.InNamespace(ns.Name)); err != nil {
			return false, err
		}
		return len(list.Items) >= 5, nil
	})
	if err != nil {
		t.Fatalf("the apiserver holds %d Events, want the 5 of the burst: %v", len(list.Items), err)
	}
	time.Sleep(time.Second) // anything more would have arrived by now
	if err := env.Client.List(ctx, &list, client.InNamespace(ns.Name)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 5 {
		t.Errorf("the apiserver holds %d Events, want 5", len(list.Items))
	}
	for _, e := range list.Items {
		if e.Reason != "Burst" || e.InvolvedObject.Name != "busy" || e.ReportingController != "anvil-test" {
			t.Errorf("Event %s: reason %s about %s from %s", e.Name, e.Reason, e.InvolvedObject.Name, e.ReportingController)
		}
		if want := "(100% distinct)"; len(e.Message) == 0 || e.Message[len(e.Message)-len(want):] != want {
			t.Errorf("Event message %q, want it formatted once", e.Message)
		}
	}
}

// Events of one reason and action on one object fold into one series whatever their notes;
// naming what each is about (a builder Machine per architecture) keeps them apart.
func TestEventsAboutDifferentObjectsStayApart(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "events-about"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	folded := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "folded"}}
	apart := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "apart"}}
	for _, o := range []client.Object{folded, apart} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder(t, NewLimit(100, 100))
	for _, arch := range []string{"amd64", "arm64"} {
		rec.Normal(folded, "Created", "Create", "%s builder", arch)
		part := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "builder-" + arch}}
		rec.NormalAbout(apart, part, "Created", "Create", "%s builder", arch)
	}
	count := func(name string) int {
		list := &corev1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns.Name)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range list.Items {
			if e.InvolvedObject.Name == name {
				n++
			}
		}
		return n
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return count("apart") == 2 && count("folded") >= 1, nil
	}); err != nil {
		t.Fatalf("Events regarding apart: %d, want 2 (one per builder); regarding folded: %d", count("apart"), count("folded"))
	}
	if n := count("folded"); n != 1 {
		t.Errorf("Events regarding folded: %d, want 1 (a series): the events API's folding changed", n)
	}
}

// newRecorder is a Recorder under limit writing to the test's apiserver through the events
// API, as a process's is; its broadcaster stops with the test.
func newRecorder(t *testing.T, limit *Limit) *Recorder {
	t.Helper()
	sink, err := eventsv1client.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: sink})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	b.StartRecordingToSink(stop)
	return New(b.NewRecorder(env.Scheme, "anvil-test"), limit)
}
