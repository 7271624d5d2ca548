package watchstats

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// scriptedLW answers lists from its script in turn (the last one again and again) and
// hands each watch it opens to the test.
type scriptedLW struct {
	lists   chan *corev1.ConfigMapList
	last    *corev1.ConfigMapList
	watches chan *watch.FakeWatcher
}

func (s *scriptedLW) List(metav1.ListOptions) (runtime.Object, error) {
	select {
	case l := <-s.lists:
		s.last = l
	default:
	}
	return s.last.DeepCopy(), nil
}

func (s *scriptedLW) Watch(metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFake()
	s.watches <- w
	return w, nil
}

// IsWatchListSemanticsUnSupported: the script answers plain lists only.
func (*scriptedLW) IsWatchListSemanticsUnSupported() bool { return true }

func configMaps(rv, value string) *corev1.ConfigMapList {
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: []corev1.ConfigMap{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: rv}, Data: map[string]string{"v": value}}}}
}

// eventually fails the test unless ok turns true within a few seconds.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not so after 10s: %s", what)
		}
	}
}

// An informer over a counted ListerWatcher relists when its watch expires (client-go's
// reflector does), gets the state it missed, and the expiry, the relist and a watch
// closed early are counted.
func TestExpiryRelistsAndIsCounted(t *testing.T) {
	lw := &scriptedLW{lists: make(chan *corev1.ConfigMapList, 2), watches: make(chan *watch.FakeWatcher, 4)}
	lw.lists <- configMaps("1", "before")
	lw.lists <- configMaps("5", "missed by the watch")
	key := Key{"unit-expiry", "ConfigMap"}
	inf := toolscache.NewSharedIndexInformer(Counted(lw, key.Client, key.Kind), &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("never synced")
	}
	value := func() string {
		o, ok, _ := inf.GetStore().GetByKey("ns/a")
		if !ok {
			return ""
		}
		return o.(*corev1.ConfigMap).Data["v"]
	}
	if got := value(); got != "before" {
		t.Fatalf("after the first list a says %q", got)
	}
	first := <-lw.watches
	s := apierrors.NewResourceExpired("too old resource version: 1 (5)").Status()
	first.Error(&s)
	second := <-lw.watches
	eventually(t, "the relist's state is in the informer", func() bool { return value() == "missed by the watch" })
	eventually(t, "one relist and one expiry counted", func() bool {
		c := Read()[key]
		return c.Relists == 1 && c.Ends["expired"] == 1
	})

	// The apiserver closes the second watch early, after an event: resumed, not relisted.
	second.Modify(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "6"}, Data: map[string]string{"v": "watched"}})
	second.Stop()
	third := <-lw.watches
	eventually(t, "one early close counted", func() bool { return Read()[key].Ends["closed"] == 1 })
	if c := Read()[key]; c.Relists != 1 {
		t.Errorf("a closed watch made the informer relist: %+v", c)
	}
	third.Modify(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "7"}, Data: map[string]string{"v": "resumed"}})
	eventually(t, "the resumed watch's event is in the informer", func() bool { return value() == "resumed" })

	// The next is closed at once without an event: client-go takes the watch for broken
	// and relists.
	third.Stop()
	fourth := <-lw.watches
	lw.lists <- configMaps("8", "relisted after a short watch")
	fourth.Stop()
	<-lw.watches
	eventually(t, "the short watch and its relist counted", func() bool {
		c := Read()[key]
		return c.Ends["closed"] == 2 && c.Ends["short"] == 1 && c.Relists == 2
	})
	eventually(t, "the relist's state is in the informer", func() bool { return value() == "relisted after a short watch" })

	// Stopping the informer stops its watch: not an end to count.
	cancel()
	time.Sleep(100 * time.Millisecond)
	if c := Read()[key]; c.Ends["closed"] != 2 || c.Ends["short"] != 1 || c.Ends["error"] != 0 {
		t.Errorf("stopping the informer was counted: %+v", c)
	}
}

func TestKindOf(t *testing.T) {
	if k := KindOf(&corev1.ConfigMap{}); k != "ConfigMap" {
		t.Errorf("KindOf(ConfigMap) = %q", k)
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if k := KindOf(m); k != "Secret" {
		t.Errorf("KindOf(metadata of a Secret) = %q", k)
	}
}
