package rollout

import (
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imagebuild"
)

// TargetAnnotation is the value of AnnotationRolloutTarget that asks a Machine booting tag
// (as imagebuild.TagName spells it) to boot the index digest.
func TargetAnnotation(tag, digest string) string { return tag + "@" + digest }

// Target is the index digest m's AnnotationRolloutTarget asks it to boot, or "" when it
// asks nothing of the image m names now: no annotation, one for another tag (the Machine
// was moved to another image since), or one that is not TAG@sha256:<64 hex digits>.
func Target(m *computev1alpha1.Machine) string {
	v := m.Annotations[imagesv1alpha1.AnnotationRolloutTarget]
	base, digest, ok := strings.Cut(v, "@")
	if !ok || imagebuild.TagName(base) == "" || imagebuild.TagName(base) != imagebuild.TagName(m.Spec.Image) {
		return ""
	}
	if _, err := name.NewDigest(v); err != nil {
		return ""
	}
	return digest
}

// Observe is what Decide needs of m, a Machine bound to a pool that boots the rollout's
// tag under the Reimage policy; current says whether it runs the entry published for its
// architecture now.
//
// A Machine is available when it is as its spec asks: running and Ready, or, powered off
// by its spec, shut down. So a Machine its user powered off costs no budget, and is still
// reimaged (its next boot boots the new index). A Machine asked without a readable time
// is taken as not asked: it is asked again, with a time.
func Observe(m *computev1alpha1.Machine, current bool) Machine {
	out := Machine{Name: m.Name, Pool: m.Spec.MachinePoolRef.Name, Current: current}
	switch m.Spec.Power {
	case computev1alpha1.PowerOff:
		out.Available = m.Status.State == computev1alpha1.MachineStateShutdown
	default:
		out.Available = m.Status.State == computev1alpha1.MachineStateRunning &&
			meta.IsStatusConditionTrue(m.Status.Conditions, computev1alpha1.ConditionReady)
	}
	if at, err := time.Parse(time.RFC3339, m.Annotations[imagesv1alpha1.AnnotationRolloutAskedAt]); err == nil {
		if out.Asked = Target(m); out.Asked != "" {
			out.AskedAt = at
		}
	}
	// The poollet's refusal names the image it refused, digest included: one left from an
	// earlier target is not this one's.
	if c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionReimaging); c != nil && out.Asked != "" &&
		c.Status == metav1.ConditionFalse && c.Reason == computev1alpha1.ReasonReimageRefused && strings.Contains(c.Message, out.Asked) {
		out.Refused = c.Message
	}
	return out
}
