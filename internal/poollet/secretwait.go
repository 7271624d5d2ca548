package poollet

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// A poollet may read a Machine's first-boot Secret only once the controller manager has
// granted it (internal/controller/secretaccess), which the manager does on seeing the
// Machine bound, or its Secret refs change: the very moment the poollet sees the same and
// reads. So the first read often fails (Forbidden, or NotFound) just before the grant
// lands. The poollet watches neither Secrets nor Roles, and nothing in the Machine marks
// when it was bound (the scheduler's bind writes no condition), so the wait is measured
// from the poollet's first failed read of the Machine's generation, which follows the
// binding (or the change) within the watch's delay.

// minSecretRetry is the first look again after a Secret could not be read: a grant is a
// few API writes and the apiserver's RBAC cache away.
const minSecretRetry = 500 * time.Millisecond

// secretRetry is how long to wait before reading again a first-boot Secret that has not
// been readable since since: as long again as it has been unreadable, so reads come
// quickly while a grant can still be on its way and double their spacing after, within
// [minSecretRetry, limit]. A limit below minSecretRetry wins (0 keeps its meaning: no
// timed retry).
func secretRetry(since, now time.Time, limit time.Duration) time.Duration {
	d := max(now.Sub(since), minSecretRetry)
	return min(d, limit)
}

// unreadSecrets remembers, per Machine, since when its first-boot Secret could not be
// read, for the Machine's UID and generation then: a new Machine of the name, or a spec
// change (new Secret refs, a new grant), starts the wait again.
type unreadSecrets struct {
	m sync.Map // types.NamespacedName -> unreadSecret
}

type unreadSecret struct {
	uid        types.UID
	generation int64
	since      time.Time
}

// failed records that m's Secret could not be read at now, and returns since when.
func (u *unreadSecrets) failed(m *computev1alpha1.Machine, now time.Time) time.Time {
	want := unreadSecret{uid: m.UID, generation: m.Generation, since: now}
	if v, ok := u.m.Load(client.ObjectKeyFromObject(m)); ok {
		if have := v.(unreadSecret); have.uid == want.uid && have.generation == want.generation {
			return have.since
		}
	}
	u.m.Store(client.ObjectKeyFromObject(m), want)
	return now
}

// since is when m's Secret was first found unreadable, if its last read failed so.
func (u *unreadSecrets) since(m *computev1alpha1.Machine) (time.Time, bool) {
	v, ok := u.m.Load(client.ObjectKeyFromObject(m))
	if !ok {
		return time.Time{}, false
	}
	have := v.(unreadSecret)
	return have.since, have.uid == m.UID && have.generation == m.Generation
}

// forget drops what is known of the Machine key: its Secret was read, or it is gone.
func (u *unreadSecrets) forget(key types.NamespacedName) { u.m.Delete(key) }
