package poollet

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func TestUnreadSecrets(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 22, 0, 0, 0, time.UTC)
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "a", Generation: 1}}
	var u unreadSecrets
	if _, ok := u.since(m); ok {
		t.Fatal("a Machine never read has a wait")
	}
	if got := u.failed(m, t0); !got.Equal(t0) {
		t.Errorf("first failure: since %v, want %v", got, t0)
	}
	if got := u.failed(m, t0.Add(time.Second)); !got.Equal(t0) {
		t.Errorf("second failure: since %v, want the first's %v", got, t0)
	}
	if got, ok := u.since(m); !ok || !got.Equal(t0) {
		t.Errorf("since = %v, %v; want %v", got, ok, t0)
	}
	changed := m.DeepCopy()
	changed.Generation = 2 // new Secret refs: a new grant on its way
	if _, ok := u.since(changed); ok {
		t.Error("a changed spec keeps the old wait")
	}
	if got := u.failed(changed, t0.Add(time.Minute)); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("failure of a changed spec: since %v, want %v", got, t0.Add(time.Minute))
	}
	again := m.DeepCopy()
	again.UID = "b" // a new Machine of the same name
	if _, ok := u.since(again); ok {
		t.Error("a new Machine of the name inherits the old one's wait")
	}
	u.forget(types.NamespacedName{Namespace: "ns", Name: "vm"})
	if _, ok := u.since(changed); ok {
		t.Error("a forgotten Machine still has a wait")
	}
}
