// Package requeue is how every controller and the poollet look again at an object whose
// write lost an optimistic-concurrency race (a Conflict, or a copy known to be stale).
package requeue

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// conflictDelay is long enough for the cache to receive the write that won, so the retry
// starts from it, and short enough that nobody waits for it.
const conflictDelay = 100 * time.Millisecond

// AfterConflict is the result of a reconcile whose write lost a race: not a failure (it is
// neither logged nor backed off), just a look again soon.
func AfterConflict() ctrl.Result { return ctrl.Result{RequeueAfter: conflictDelay} }
