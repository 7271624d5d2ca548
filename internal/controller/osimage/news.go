package osimage

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/imagebuild"
)

// statusEvent is an Event whose news a status carries (a build failed, an index was
// published, a rollout stalled): it is recorded once that status is written, so a write
// that loses a race and is decided again does not tell it twice. about, when set, is the
// object it concerns besides the one it regards (events.Recorder.NormalAbout).
type statusEvent struct {
	typ, reason, action, msg string
	about                    runtime.Object
}

// record writes evs as Events of obj.
func record(to *events.Recorder, obj runtime.Object, evs []statusEvent) {
	for _, e := range evs {
		if e.typ == corev1.EventTypeWarning {
			to.WarningAbout(obj, e.about, e.reason, e.action, "%s", e.msg)
		} else {
			to.NormalAbout(obj, e.about, e.reason, e.action, "%s", e.msg)
		}
	}
}

// builderOf is a reference to the builder Machine of arch's attempt of build b: what its
// Events are about, so that each architecture's stays its own.
func builderOf(b *imagesv1alpha1.OSImageBuild, arch string, attempt int32) *computev1alpha1.Machine {
	return &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: imagebuild.BuilderName(b.Name, arch, attempt)}}
}
