package osimage

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/anvil-dev/anvil/internal/events"
)

// statusEvent is an Event whose news a status carries (a build failed, an index was
// published, a rollout stalled): it is recorded once that status is written, so a write
// that loses a race and is decided again does not tell it twice.
type statusEvent struct{ typ, reason, action, msg string }

// record writes evs as Events of obj.
func record(to *events.Recorder, obj runtime.Object, evs []statusEvent) {
	for _, e := range evs {
		if e.typ == corev1.EventTypeWarning {
			to.Warning(obj, e.reason, e.action, "%s", e.msg)
		} else {
			to.Normal(obj, e.reason, e.action, "%s", e.msg)
		}
	}
}
