package osimage_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	osimagecontroller "github.com/anvil-dev/anvil/internal/controller/osimage"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/test/testos"
)

// The rollout signal alone, on a real apiserver and registry: the OSImage's status is
// written by the test (no build runs), Machines' status.image as the poollet writes it.
func TestImageUpToDateFollowsThePublishedEntry(t *testing.T) {
	ctx := context.Background()
	startManager(t, osimagecontroller.SetupImageUpToDate)

	// The published index has both architectures; an older index of the same tag had amd64
	// only, with the same amd64 image: its amd64 Machine runs the published entry.
	dir := testos.Dir(t)
	tag := env.Registry.Host + "/default/rollout:1"
	old, _, err := osimage.PushDirs(ctx, env.Registry.Host+"/default/rollout:old", map[computev1alpha1.Architecture]string{"amd64": filepath.Join(dir, "amd64")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	current, entries, err := osimage.PushDirs(ctx, tag, map[computev1alpha1.Architecture]string{"amd64": filepath.Join(dir, "amd64"), "arm64": filepath.Join(dir, "arm64")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	digestOf := func(pinned string) string { _, d, _ := strings.Cut(pinned, "@"); return d }

	o := recipe("rollout", "unused", "amd64", "arm64")
	o.Spec.Output.Tag = "1"
	if err := env.Client.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	publish := func(index, arm64 string) {
		o.Status.Index = index
		o.Status.Published = []imagesv1alpha1.PublishedEntry{
			{Architecture: "amd64", Digest: entries["amd64"].String(), InputHash: "a"},
			{Architecture: "arm64", Digest: arm64, InputHash: "r"},
		}
		if err := env.Client.Status().Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	publish(digestOf(current), entries["arm64"].String())

	booted := func(name string, arch computev1alpha1.Architecture, digest string) *computev1alpha1.Machine {
		m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"}, Image: tag}}
		if err := env.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status.Architecture = arch
		m.Status.Image = &computev1alpha1.BootedImage{Reference: tag, Digest: digest}
		if err := env.Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), m) })
		return m
	}
	arm := booted("rollout-arm64", "arm64", digestOf(current))
	amdOld := booted("rollout-amd64-old-index", "amd64", digestOf(old))
	waitUpToDate(t, arm, metav1.ConditionTrue, computev1alpha1.ReasonImageCurrent)
	waitUpToDate(t, amdOld, metav1.ConditionTrue, computev1alpha1.ReasonImageCurrent)

	// A new arm64 entry: the arm64 Machine is behind, the amd64 one is not.
	newer := "sha256:" + strings.Repeat("b", 64)
	publish("sha256:"+strings.Repeat("c", 64), newer)
	msg := waitUpToDate(t, arm, metav1.ConditionFalse, computev1alpha1.ReasonNewerImagePublished)
	if !strings.Contains(msg, newer) {
		t.Errorf("message %q does not name the new entry", msg)
	}
	waitEvent(t, arm, computev1alpha1.ReasonNewerImagePublished)
	waitUpToDate(t, amdOld, metav1.ConditionTrue, computev1alpha1.ReasonImageCurrent)

	// Changing spec.image of a created Machine: until it runs the new image (no pool runs
	// it here), it says so.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(amdOld), amdOld); err != nil {
		t.Fatal(err)
	}
	amdOld.Spec.Image = env.Registry.Host + "/out/elsewhere:2"
	if err := env.Client.Update(ctx, amdOld); err != nil {
		t.Fatal(err)
	}
	waitUpToDate(t, amdOld, metav1.ConditionFalse, computev1alpha1.ReasonImageChanged)
	waitEvent(t, amdOld, computev1alpha1.ReasonImageChanged)
}

// waitUpToDate waits for the Machine's ImageUpToDate condition and returns its message.
func waitUpToDate(t *testing.T, m *computev1alpha1.Machine, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	var msg string
	eventually(t, fmt.Sprintf("Machine %s: ImageUpToDate %s/%s", m.Name, status, reason), func() (bool, string) {
		got := &computev1alpha1.Machine{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(m), got); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, computev1alpha1.ConditionImageUpToDate)
		if c != nil && c.Status == status && c.Reason == reason {
			msg = c.Message
			return true, ""
		}
		return false, fmt.Sprintf("%+v", c)
	})
	return msg
}

// waitEvent waits for a Warning Event with reason about the Machine.
func waitEvent(t *testing.T, m *computev1alpha1.Machine, reason string) {
	t.Helper()
	eventually(t, fmt.Sprintf("a %s Event for Machine %s", reason, m.Name), func() (bool, string) {
		events := &corev1.EventList{}
		if err := env.Client.List(context.Background(), events, client.InNamespace(m.Namespace)); err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == m.Name && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(events.Items))
	})
}
