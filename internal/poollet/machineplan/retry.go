package machineplan

import (
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// A poollet may read a Machine's first-boot Secret only once the controller manager has
// granted it (internal/controller/secretaccess), which the manager does on seeing the
// Machine bound, or its Secret refs change: the very moment the poollet sees the same and
// reads. So the first read often fails (Forbidden, or NotFound) just before the grant
// lands. The poollet watches neither Secrets nor Roles, and nothing in the Machine marks
// when it was bound (the scheduler's bind writes no condition), so the wait is measured
// from the poollet's first failed read of the Machine's generation, which follows the
// binding (or the change) within the watch's delay.

// MinSecretRetry is the first look again after a Secret could not be read: a grant is a
// few API writes and the apiserver's RBAC cache away.
const MinSecretRetry = 500 * time.Millisecond

// SecretRetry is how long to wait before reading again a first-boot Secret that has not
// been readable since since: as long again as it has been unreadable, so reads come
// quickly while a grant can still be on its way and double their spacing after, within
// [MinSecretRetry, limit]. A limit below MinSecretRetry wins (0 keeps its meaning: no
// timed retry).
func SecretRetry(since, now time.Time, limit time.Duration) time.Duration {
	d := max(now.Sub(since), MinSecretRetry)
	return min(d, limit)
}

// Lag is what a poollet remembers of a runtime machine that is behind its spec: since
// when it has been seen so. The zero Lag remembers nothing.
type Lag struct{ Since time.Time }

// stuck reports whether rm has lagged behind its spec for longer than after since lag
// began (the runtime may have lost the step, and repeating the call is safe), and what to
// remember from now on: a machine that has settled is forgotten, and a repeated call
// starts the wait again.
func stuck(rm *mriv1alpha1.Machine, lag Lag, now time.Time, after time.Duration) (bool, Lag) {
	if Settled(rm) || after <= 0 {
		return false, Lag{}
	}
	if lag.Since.IsZero() {
		lag.Since = now
	}
	if now.Sub(lag.Since) < after {
		return false, lag
	}
	return true, Lag{Since: now}
}
