package poollet_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/internal/rollout"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

// An OSImage's rollout asks a Machine booting its tag to boot one index (the annotation
// the OSImage controller writes): the poollet reimages it in place to that digest, not to
// whatever the tag names when it looks, and only while spec.image still names that tag
// and its policy is Reimage. A digest the runtime cannot find is refused, naming it.
func TestRolloutTargetReimagesToItsIndex(t *testing.T) {
	startControllers(t)
	tag, booted, registries := imageOnRegistry(t, "/anvil/rollout:1")
	// asked is in the pool's images but not what the tag names: a fresh resolve of the tag
	// would not find it. missing is in neither.
	asked := "sha256:" + strings.Repeat("4", 64)
	missing := "sha256:" + strings.Repeat("5", 64)
	p := startPool(t, &testPool{t: t, name: "rollout", registries: registries}, func(c *fake.Config) {
		c.Images = map[string][]mriv1alpha1.Architecture{booted: nil, asked: nil}
	})
	m := newMachine(t, p.name, "vm", func(m *computev1alpha1.Machine) { m.Spec.Image = tag })
	m = waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	id := m.Status.MachineID
	ask := func(target string) {
		patchMachine(t, m, func(m *computev1alpha1.Machine) {
			m.Annotations = map[string]string{imagesv1alpha1.AnnotationRolloutTarget: target,
				imagesv1alpha1.AnnotationRolloutAskedAt: time.Now().UTC().Format(time.RFC3339)}
		})
	}

	ask(rollout.TargetAnnotation(imagebuild.TagName(tag), asked))
	m = waitFor(t, m, "was reimaged to the asked index", func(m *computev1alpha1.Machine) bool {
		return inState(computev1alpha1.MachineStateRunning)(m) && conditionIs(computev1alpha1.ConditionReimaging, computev1alpha1.ReasonReimaged)(m) &&
			m.Status.Image != nil && m.Status.Image.Digest == asked
	})
	if m.Status.MachineID != id || m.Status.Image.Reference != tag {
		t.Errorf("after the reimage: machine %s image %+v, want the same machine %s running %s@%s", m.Status.MachineID, m.Status.Image, id, tag, asked)
	}
	waitFor(t, m, "recorded both Events", func(*computev1alpha1.Machine) bool {
		got := eventSummary(t, m)
		return strings.Contains(got, computev1alpha1.ReasonReimaging+":1") && strings.Contains(got, computev1alpha1.ReasonReimaged+":1")
	})

	// Asked for another tag (the Machine names this one now), under Never, or in a spelling
	// that is no pinned reference: nothing moves.
	generation := p.runtimeMachines(m)[0].Metadata.Generation
	ask(rollout.TargetAnnotation(imagebuild.TagName(strings.TrimSuffix(tag, ":1")+":2"), missing))
	ask(imagebuild.TagName(tag) + "@" + missing[:20])
	patchMachine(t, m, func(m *computev1alpha1.Machine) { m.Spec.ImageUpdatePolicy = computev1alpha1.ImageUpdatePolicyNever })
	ask(rollout.TargetAnnotation(imagebuild.TagName(tag), missing))
	waitFor(t, m, "observed the Never policy", func(m *computev1alpha1.Machine) bool { return m.Status.ObservedGeneration == m.Generation })
	time.Sleep(time.Second)
	if rms := p.runtimeMachines(m); len(rms) != 1 || rms[0].Metadata.Generation != generation || rms[0].Spec.Image.Digest != asked {
		t.Fatalf("runtime machines %v, want the one machine left alone on %s", rms, asked)
	}

	// Back to Reimage: the missing index is refused, naming it; the machine keeps running.
	patchMachine(t, m, func(m *computev1alpha1.Machine) { m.Spec.ImageUpdatePolicy = computev1alpha1.ImageUpdatePolicyReimage })
	m = waitFor(t, m, "said the reimage was refused", conditionIs(computev1alpha1.ConditionReimaging, computev1alpha1.ReasonReimageRefused))
	if c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionReimaging); !strings.Contains(c.Message, tag+"@"+missing) || !strings.Contains(c.Message, tag+"@"+asked) {
		t.Errorf("Reimaging says %q, want the refused index and the one it keeps running", c.Message)
	}
	if m.Status.State != computev1alpha1.MachineStateRunning || m.Status.Image.Digest != asked {
		t.Errorf("after the refusal: %s on %+v, want Running on %s", m.Status.State, m.Status.Image, asked)
	}
}
