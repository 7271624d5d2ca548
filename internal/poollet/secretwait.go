package poollet

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// How long the poollet waits before reading again a first-boot Secret it could not read
// is machineplan.SecretRetry's decision; this is the memory behind it.

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

// sinceOf is since when m's Secret has been unreadable, if its last read failed so;
// zero otherwise.
func (u *unreadSecrets) sinceOf(m *computev1alpha1.Machine) time.Time {
	if since, ok := u.since(m); ok {
		return since
	}
	return time.Time{}
}

// forget drops what is known of the Machine key: its Secret was read, or it is gone.
func (u *unreadSecrets) forget(key types.NamespacedName) { u.m.Delete(key) }
