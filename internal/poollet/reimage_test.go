package poollet_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

const (
	otherImage   = "registry.example/testos@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	missingImage = "registry.example/testos@sha256:3333333333333333333333333333333333333333333333333333333333333333"
)

// knownImages makes the pool's runtime find the test image and otherImage only: a
// reimage to anything else is IMAGE_NOT_FOUND, as a runtime reading a registry answers.
func knownImages(c *fake.Config) {
	c.Images = map[string][]mriv1alpha1.Architecture{digestOf(testImage): nil, digestOf(otherImage): nil}
}

func digestOf(ref string) string { _, d, _ := strings.Cut(ref, "@"); return d }

func patchMachine(t *testing.T, m *computev1alpha1.Machine, change func(*computev1alpha1.Machine)) {
	t.Helper()
	cur := &computev1alpha1.Machine{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(m), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	change(cur)
	if err := env.Client.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
}

func conditionIs(typ, reason string) func(*computev1alpha1.Machine) bool {
	return func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, typ)
		return c != nil && c.Reason == reason && c.ObservedGeneration == m.Generation
	}
}

// eventSummary is each reason of the Events about m (this Machine, by UID) in the order
// first seen, with how often it happened ("Started:2"), counting the occurrences the
// events API folded into a series.
func eventSummary(t *testing.T, m *computev1alpha1.Machine) string {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(m.Namespace)); err != nil {
		t.Fatal(err)
	}
	sort.SliceStable(list.Items, func(i, j int) bool { return eventTime(list.Items[i]).Before(eventTime(list.Items[j])) })
	var order []string
	counts := map[string]int{}
	for _, e := range list.Items {
		if e.InvolvedObject.UID != m.UID {
			continue
		}
		if counts[e.Reason] == 0 {
			order = append(order, e.Reason)
		}
		n := 1
		if e.Series != nil && e.Series.Count > 1 {
			n = int(e.Series.Count)
		}
		counts[e.Reason] += n
	}
	var out []string
	for _, r := range order {
		out = append(out, fmt.Sprintf("%s:%d", r, counts[r]))
	}
	return strings.Join(out, " ")
}

func eventTime(e corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// A bound Machine's image changed: the runtime machine is reimaged in place (same id),
// status.image and observedGeneration follow only once it runs the new image, and the
// Machine says so (Reimaging then Reimaged, with Events). The first-boot config it boots
// with is the one the spec names then.
func TestImageChangeReimagesInPlace(t *testing.T) {
	startControllers(t)
	p := newPool(t, "reimage", knownImages)
	_ = env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-reimage"}})
	for _, s := range []struct{ name, data string }{{"boot-1", "#cloud-config\n# one\n"}, {"boot-2", "#cloud-config\n# two\n"}} {
		if err := env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-reimage", Name: s.name},
			Data: map[string][]byte{computev1alpha1.DefaultUserDataKey: []byte(s.data)}}); err != nil {
			t.Fatal(err)
		}
	}
	m := newMachine(t, "reimage", "vm", func(m *computev1alpha1.Machine) {
		m.Spec.UserDataRef = &computev1alpha1.SecretKeySelector{Name: "boot-1"}
	})
	m = waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	id := m.Status.MachineID

	// The first-boot config changes: nothing is reimaged, the Machine says when it applies.
	patchMachine(t, m, func(m *computev1alpha1.Machine) { m.Spec.UserDataRef.Name = "boot-2" })
	waitFor(t, m, "said the new first-boot config waits", conditionIs(computev1alpha1.ConditionFirstBootUpToDate, computev1alpha1.ReasonAppliedAtNextReimage))

	patchMachine(t, m, func(m *computev1alpha1.Machine) { m.Spec.Image = otherImage })
	m = waitFor(t, m, "was reimaged", func(m *computev1alpha1.Machine) bool {
		return inState(computev1alpha1.MachineStateRunning)(m) && conditionIs(computev1alpha1.ConditionReimaging, computev1alpha1.ReasonReimaged)(m)
	})
	if m.Status.MachineID != id || m.Status.Image == nil || m.Status.Image.Reference != otherImage || m.Status.Image.Digest != digestOf(otherImage) {
		t.Errorf("after the reimage: machine %s image %+v, want the same machine %s running %s", m.Status.MachineID, m.Status.Image, id, otherImage)
	}
	if !meta.IsStatusConditionTrue(m.Status.Conditions, computev1alpha1.ConditionFirstBootUpToDate) {
		t.Errorf("FirstBootUpToDate after the reimage: %+v, want True", meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionFirstBootUpToDate))
	}
	rms := p.runtimeMachines(m)
	if len(rms) != 1 || string(rms[0].Spec.FirstBoot.Data) != "#cloud-config\n# two\n" || rms[0].Spec.Image.Digest != digestOf(otherImage) {
		t.Fatalf("runtime machines %v, want one, running the new image with the new first-boot config", rms)
	}
	waitFor(t, m, "recorded both Events", func(*computev1alpha1.Machine) bool {
		got := eventSummary(t, m)
		return strings.Contains(got, computev1alpha1.ReasonReimaging+":1") && strings.Contains(got, computev1alpha1.ReasonReimaged+":1")
	})
}

// Under imageUpdatePolicy Never the machine keeps what it booted, and says nothing false:
// the spec is observed (the policy is honoured) and the runtime is not asked to reimage.
func TestImageUpdatePolicyNeverKeepsTheBootedImage(t *testing.T) {
	startControllers(t)
	p := newPool(t, "keep", knownImages)
	m := newMachine(t, "keep", "vm", func(m *computev1alpha1.Machine) { m.Spec.ImageUpdatePolicy = computev1alpha1.ImageUpdatePolicyNever })
	m = waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	patchMachine(t, m, func(m *computev1alpha1.Machine) { m.Spec.Image = otherImage; m.Spec.Power = computev1alpha1.PowerOff })
	m = waitFor(t, m, "shut down", inState(computev1alpha1.MachineStateShutdown))
	if m.Status.Image.Reference != testImage || meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionReimaging) != nil {
		t.Errorf("status.image %+v, Reimaging %+v: want the booted image kept and no reimage", m.Status.Image, meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionReimaging))
	}
	if rms := p.runtimeMachines(m); len(rms) != 1 || rms[0].Spec.Image.Digest != digestOf(testImage) {
		t.Errorf("runtime machines %v, want one still on %s", rms, testImage)
	}
}

// An image the runtime cannot find: the reimage is refused, the machine keeps running its
// image, observedGeneration stays behind the spec (it was not applied), and the Machine's
// other changes still reach the runtime.
func TestRefusedReimageKeepsTheMachineAndSaysWhy(t *testing.T) {
	startControllers(t)
	p := newPool(t, "refuse", knownImages)
	m := newMachine(t, "refuse", "vm", nil)
	m = waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
	patchMachine(t, m, func(m *computev1alpha1.Machine) { m.Spec.Image = missingImage; m.Spec.Power = computev1alpha1.PowerOff })
	m = waitFor(t, m, "said the reimage was refused", conditionIs(computev1alpha1.ConditionReimaging, computev1alpha1.ReasonReimageRefused))
	if c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionReimaging); !strings.Contains(c.Message, "MachinePool refuse refused image "+missingImage) {
		t.Errorf("Reimaging says %q, want the pool, the image and why", c.Message)
	}
	waitRuntime(t, p, m, "powered off", func(rm *mriv1alpha1.Machine) bool {
		return rm.Spec.Power == mriv1alpha1.Power_POWER_OFF && rm.Status.State == mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN
	})
	m = waitFor(t, m, "reported Shutdown", func(m *computev1alpha1.Machine) bool { return m.Status.State == computev1alpha1.MachineStateShutdown })
	if m.Status.ObservedGeneration == m.Generation || m.Status.Image.Reference != testImage {
		t.Errorf("observedGeneration %d of %d, image %+v: want the unapplied spec not observed and the booted image kept", m.Status.ObservedGeneration, m.Generation, m.Status.Image)
	}
}
