package inplace

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

func spec(mut ...func(*infrav1.AnvilMachineSpec)) infrav1.AnvilMachineSpec {
	s := infrav1.AnvilMachineSpec{
		MachineClassRef:     computev1alpha1.MachineClassReference{Name: "small"},
		Image:               "registry.example/os:1",
		Architecture:        computev1alpha1.ArchitectureARM64,
		MachinePoolSelector: map[string]string{"kind": "vm"},
	}
	for _, f := range mut {
		f(&s)
	}
	return s
}

func template(s infrav1.AnvilMachineSpec) infrav1.AnvilMachineTemplateSpec {
	return infrav1.AnvilMachineTemplateSpec{Template: infrav1.AnvilMachineTemplateResource{Spec: s}}
}

func image(i string) func(*infrav1.AnvilMachineSpec) {
	return func(s *infrav1.AnvilMachineSpec) { s.Image = i }
}

func TestCanUpdate(t *testing.T) {
	for _, tc := range []struct {
		name             string
		current, desired infrav1.AnvilMachineSpec
		// covers is the image the patch sets; "" means no patch.
		covers string
	}{
		{name: "a new image is covered", current: spec(), desired: spec(image("registry.example/os:2")), covers: "registry.example/os:2"},
		{name: "a new image with a new class: only the image is covered", current: spec(),
			desired: spec(image("registry.example/os:2"), func(s *infrav1.AnvilMachineSpec) { s.MachineClassRef.Name = "large" }),
			covers:  "registry.example/os:2"},
		{name: "no change: nothing to cover", current: spec(), desired: spec()},
		{name: "another class alone: nothing covered", current: spec(), desired: spec(func(s *infrav1.AnvilMachineSpec) { s.MachineClassRef.Name = "large" })},
		{name: "another architecture alone: nothing covered", current: spec(), desired: spec(func(s *infrav1.AnvilMachineSpec) { s.Architecture = computev1alpha1.ArchitectureAMD64 })},
		{name: "an empty desired image is never covered", current: spec(), desired: spec(image(""))},
		{name: "a current without an image still gets the new one", current: spec(image("")), desired: spec(), covers: "registry.example/os:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(p runtimehooksv1.Patch, path string) {
				t.Helper()
				if tc.covers == "" {
					if p.IsDefined() {
						t.Fatalf("patch %s, want none", p.Patch)
					}
					return
				}
				if p.PatchType != runtimehooksv1.JSONPatchType {
					t.Fatalf("patch type %q, want JSONPatch", p.PatchType)
				}
				var ops []patchOp
				if err := json.Unmarshal(p.Patch, &ops); err != nil {
					t.Fatal(err)
				}
				want := []patchOp{{Op: "add", Path: path, Value: tc.covers}}
				if !equality.Semantic.DeepEqual(ops, want) {
					t.Fatalf("patch %s, want %+v", p.Patch, want)
				}
			}
			if p := CanUpdateMachine(tc.current, tc.desired); p.IsDefined() {
				t.Fatalf("a control-plane machine's patch %s, want none (ControlPlaneKept)", p.Patch)
			}
			check(CanUpdateMachineSet(template(tc.current), template(tc.desired)), TemplateImagePath)
		})
	}
}

// genSpec draws an AnvilMachine spec from a few values per field, so that two draws often
// agree on some fields and differ on others.
func genSpec(t *rapid.T, label string) infrav1.AnvilMachineSpec {
	s := infrav1.AnvilMachineSpec{
		MachineClassRef: computev1alpha1.MachineClassReference{Name: rapid.SampledFrom([]string{"small", "large"}).Draw(t, label+"class")},
		Image:           rapid.SampledFrom([]string{"", "registry.example/os:1", "registry.example/os:2", "other.example/os@sha256:" + sha}).Draw(t, label+"image"),
		Architecture:    rapid.SampledFrom([]computev1alpha1.Architecture{"", computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64}).Draw(t, label+"arch"),
		Emulation:       rapid.SampledFrom([]computev1alpha1.Emulation{"", computev1alpha1.EmulationForbidden}).Draw(t, label+"emulation"),
	}
	if rapid.Bool().Draw(t, label+"selector") {
		s.MachinePoolSelector = map[string]string{"kind": rapid.SampledFrom([]string{"vm", "metal"}).Draw(t, label+"kind")}
	}
	if rapid.Bool().Draw(t, label+"hostSelector") {
		s.HostSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "a"}}
	}
	if rapid.Bool().Draw(t, label+"tolerations") {
		s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	}
	if rapid.Bool().Draw(t, label+"volumes") {
		s.Volumes = []computev1alpha1.MachineVolume{{Name: "root", Image: &computev1alpha1.ImageDiskSource{}}}
	}
	if rapid.Bool().Draw(t, label+"providerID") {
		s.ProviderID = "anvil://tenant/m-0"
	}
	return s
}

const sha = "0123456789012345678901234567890123456789012345678901234567890123"

// TestCanUpdateCoversOnlyTheImage: for any current and desired spec, applying the patch to
// the current object (as Cluster API does) changes nothing but the image (safety), sets the
// desired image whenever there is one to set, and makes the current equal the desired
// exactly when the image was the only difference (liveness: every image change anvil can
// apply is offered in place, nothing else is).
func TestCanUpdateCoversOnlyTheImage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		current, desired := genSpec(t, "current."), genSpec(t, "desired.")
		if rapid.Bool().Draw(t, "sameButImage") {
			desired = *current.DeepCopy()
			desired.Image = rapid.SampledFrom([]string{"", "registry.example/os:1", "registry.example/os:9"}).Draw(t, "newImage")
		}

		amt := &infrav1.AnvilMachineTemplate{TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "AnvilMachineTemplate"},
			ObjectMeta: metav1.ObjectMeta{Name: "t-1", Namespace: "tenant"}, Spec: template(current)}
		tpatched, tunpatched := applyTo(t, amt, CanUpdateMachineSet(template(current), template(desired)), &infrav1.AnvilMachineTemplate{})
		checkCoverage(t, tunpatched.Spec.Template.Spec, tpatched.Spec.Template.Spec, current, desired, equalMeta(tunpatched.ObjectMeta, tpatched.ObjectMeta))
	})
}

func equalMeta(a, b metav1.ObjectMeta) bool { return equality.Semantic.DeepEqual(a, b) }

// applyTo returns obj after a JSON round trip with p applied, and without (so both went
// through the same encoding).
func applyTo[T any](t *rapid.T, obj any, p runtimehooksv1.Patch, _ *T) (*T, *T) {
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := raw
	if p.IsDefined() {
		if p.PatchType != runtimehooksv1.JSONPatchType {
			t.Fatalf("patch type %q", p.PatchType)
		}
		decoded, err := jsonpatch.DecodePatch(p.Patch)
		if err != nil {
			t.Fatalf("patch %s does not decode: %v", p.Patch, err)
		}
		if out, err = decoded.Apply(raw); err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", p.Patch, raw, err)
		}
	}
	patched, unpatched := new(T), new(T)
	if err := json.Unmarshal(out, patched); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, unpatched); err != nil {
		t.Fatal(err)
	}
	return patched, unpatched
}

func checkCoverage(t *rapid.T, before, after, current, desired infrav1.AnvilMachineSpec, metaSame bool) {
	if !metaSame {
		t.Fatal("the patch changed the object's metadata")
	}
	// Safety: with the image put back, nothing changed.
	restored := *after.DeepCopy()
	restored.Image = before.Image
	if !equality.Semantic.DeepEqual(restored, before) {
		t.Fatalf("the patch changed more than the image:\nbefore %+v\nafter  %+v", before, after)
	}
	// The covered field is the desired one.
	if desired.Image != "" && after.Image != desired.Image {
		t.Fatalf("image %q after the patch, want the desired %q", after.Image, desired.Image)
	}
	if desired.Image == "" && after.Image != current.Image {
		t.Fatalf("an empty desired image was covered: %q", after.Image)
	}
	// Exactly the image-only changes (to a real image, or none at all) end equal to the
	// desired spec.
	onlyImage := *current.DeepCopy()
	onlyImage.Image = desired.Image
	imageOnly := equality.Semantic.DeepEqual(onlyImage, desired) && (desired.Image != "" || current.Image == "")
	// Compare through the same JSON encoding as after.
	raw, _ := json.Marshal(desired)
	var wantSpec infrav1.AnvilMachineSpec
	_ = json.Unmarshal(raw, &wantSpec)
	if got := equality.Semantic.DeepEqual(after, wantSpec); got != imageOnly {
		t.Fatalf("patched equals desired: %v, but image-only change: %v\ncurrent %+v\ndesired %+v", got, imageOnly, current, desired)
	}
}
