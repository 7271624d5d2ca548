package poollet

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func TestSecretRetry(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 22, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		unreadFor time.Duration
		limit     time.Duration
		want      time.Duration
	}{
		{"first failure: the floor", 0, 30 * time.Second, minSecretRetry},
		{"a moment later: still the floor", 100 * time.Millisecond, 30 * time.Second, minSecretRetry},
		{"after the floor: as long again", 2 * time.Second, 30 * time.Second, 2 * time.Second},
		{"long unread: the limit", time.Hour, 30 * time.Second, 30 * time.Second},
		{"exactly the limit", 30 * time.Second, 30 * time.Second, 30 * time.Second},
		{"a limit below the floor wins", 0, 200 * time.Millisecond, 200 * time.Millisecond},
		{"no limit, no timed retry (StuckAfter 0)", time.Second, 0, 0},
		{"since in the future (clock step): the floor", -time.Minute, 30 * time.Second, minSecretRetry},
	} {
		if got := secretRetry(t0, t0.Add(tc.unreadFor), tc.limit); got != tc.want {
			t.Errorf("%s: secretRetry after %v, limit %v = %v, want %v", tc.name, tc.unreadFor, tc.limit, got, tc.want)
		}
	}
}

// Following secretRetry from the first failed read, a Secret that never comes is read a
// handful of times in the first StuckAfter (30 s), and then once per StuckAfter.
func TestSecretRetrySchedule(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 22, 0, 0, 0, time.UTC)
	var reads []time.Duration
	for now := t0; now.Sub(t0) < 2*time.Minute; now = now.Add(secretRetry(t0, now, 30*time.Second)) {
		reads = append(reads, now.Sub(t0))
	}
	want := []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 32 * time.Second, 62 * time.Second, 92 * time.Second}
	if len(reads) != len(want) {
		t.Fatalf("reads at %v, want %v", reads, want)
	}
	for i := range want {
		if reads[i] != want[i] {
			t.Fatalf("reads at %v, want %v", reads, want)
		}
	}
}

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
