package mri

import (
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

func TestPlacementToMRI(t *testing.T) {
	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "a100", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name        string
		tolerations []corev1.Toleration
		emulation   computev1alpha1.Emulation
		want        *mriv1alpha1.Placement
	}{
		{"nothing to say: no placement, as machines made before the field have", nil, computev1alpha1.EmulationUnset, nil},
		{"emulation allowed says nothing either", []corev1.Toleration{}, computev1alpha1.EmulationAllowed, nil},
		{"emulation forbidden", nil, computev1alpha1.EmulationForbidden, &mriv1alpha1.Placement{NativeOnly: true}},
		{"one toleration", []corev1.Toleration{gpu}, computev1alpha1.EmulationAllowed,
			&mriv1alpha1.Placement{Tolerations: []*mriv1alpha1.Toleration{{Key: "gpu", Operator: "Equal", Value: "a100", Effect: "NoSchedule"}}}},
		{"every operator and effect, in order, with emulation forbidden", []corev1.Toleration{
			{Operator: corev1.TolerationOpExists},
			{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			{Key: "tier", Value: "batch", Effect: corev1.TaintEffectPreferNoSchedule},
			gpu,
		}, computev1alpha1.EmulationForbidden, &mriv1alpha1.Placement{NativeOnly: true, Tolerations: []*mriv1alpha1.Toleration{
			{Operator: "Exists"},
			{Key: "maintenance", Operator: "Exists", Effect: "NoExecute"},
			{Key: "tier", Value: "batch", Effect: "PreferNoSchedule"},
			{Key: "gpu", Operator: "Equal", Value: "a100", Effect: "NoSchedule"},
		}}},
		// An operator the scheduler does not know is passed on as written: the downstream
		// scheduler then refuses the same taints the caller's did.
		{"an operator anvil's scheduler does not match is kept", []corev1.Toleration{{Key: "n", Operator: "Gt", Value: "3"}},
			computev1alpha1.EmulationAllowed, &mriv1alpha1.Placement{Tolerations: []*mriv1alpha1.Toleration{{Key: "n", Operator: "Gt", Value: "3"}}}},
		{"tolerationSeconds has no MRI field", []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(30))}}, computev1alpha1.EmulationAllowed,
			&mriv1alpha1.Placement{Tolerations: []*mriv1alpha1.Toleration{{Key: "k", Operator: "Exists", Effect: "NoExecute"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PlacementToMRI(tc.tolerations, tc.emulation)
			if !proto.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Fatalf("PlacementToMRI = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlacementFromMRI(t *testing.T) {
	for _, tc := range []struct {
		name            string
		in              *mriv1alpha1.Placement
		wantTolerations []corev1.Toleration
		wantEmulation   computev1alpha1.Emulation
	}{
		{"none", nil, nil, computev1alpha1.EmulationAllowed},
		{"empty", &mriv1alpha1.Placement{}, nil, computev1alpha1.EmulationAllowed},
		{"native only", &mriv1alpha1.Placement{NativeOnly: true}, nil, computev1alpha1.EmulationForbidden},
		{"tolerations", &mriv1alpha1.Placement{Tolerations: []*mriv1alpha1.Toleration{
			{Operator: "Exists"}, {Key: "gpu", Operator: "Equal", Value: "a100", Effect: "NoSchedule"}}},
			[]corev1.Toleration{{Operator: corev1.TolerationOpExists},
				{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "a100", Effect: corev1.TaintEffectNoSchedule}},
			computev1alpha1.EmulationAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tols, emu := PlacementFromMRI(tc.in)
			if !equality.Semantic.DeepEqual(tols, tc.wantTolerations) || emu != tc.wantEmulation {
				t.Fatalf("PlacementFromMRI = %v, %q; want %v, %q", tols, emu, tc.wantTolerations, tc.wantEmulation)
			}
		})
	}
}

// A Machine's placement survives a broker hop: Machine → MRI → Machine gives the same
// tolerations (tolerationSeconds aside, which the MRI does not carry) and the same
// emulation (unset read as the API's default, Allowed); MRI → Machine → MRI gives the
// same placement, absent or not.
func TestPlacementRoundTrip(t *testing.T) {
	strs := func(values ...string) *rapid.Generator[string] {
		return rapid.OneOf(rapid.SampledFrom(values), rapid.StringMatching(`[a-z./-]{0,12}`))
	}
	toleration := rapid.Custom(func(t *rapid.T) corev1.Toleration {
		return corev1.Toleration{
			Key:      strs("", "gpu", "anvil.dev/maintenance").Draw(t, "key"),
			Operator: corev1.TolerationOperator(strs("", "Equal", "Exists", "Gt").Draw(t, "operator")),
			Value:    strs("", "a100").Draw(t, "value"),
			Effect:   corev1.TaintEffect(strs("", "NoSchedule", "PreferNoSchedule", "NoExecute").Draw(t, "effect")),
		}
	})
	emulation := rapid.SampledFrom([]computev1alpha1.Emulation{computev1alpha1.EmulationUnset, computev1alpha1.EmulationAllowed, computev1alpha1.EmulationForbidden})

	t.Run("Machine to MRI and back", rapid.MakeCheck(func(t *rapid.T) {
		tols := rapid.SliceOfN(toleration, 0, 5).Draw(t, "tolerations")
		emu := emulation.Draw(t, "emulation")
		gotTols, gotEmu := PlacementFromMRI(PlacementToMRI(tols, emu))
		if len(tols) == 0 {
			tols = nil
		}
		if emu == computev1alpha1.EmulationUnset {
			emu = computev1alpha1.EmulationAllowed
		}
		if !equality.Semantic.DeepEqual(gotTols, tols) || gotEmu != emu {
			t.Fatalf("round trip gave %v, %q; want %v, %q", gotTols, gotEmu, tols, emu)
		}
	}))
	t.Run("MRI to Machine and back", rapid.MakeCheck(func(t *rapid.T) {
		var in *mriv1alpha1.Placement
		if rapid.Bool().Draw(t, "present") {
			in = &mriv1alpha1.Placement{NativeOnly: rapid.Bool().Draw(t, "nativeOnly")}
			for _, tol := range rapid.SliceOfN(toleration, 0, 5).Draw(t, "tolerations") {
				in.Tolerations = append(in.Tolerations, &mriv1alpha1.Toleration{
					Key: tol.Key, Operator: string(tol.Operator), Value: tol.Value, Effect: string(tol.Effect)})
			}
			if len(in.Tolerations) == 0 && !in.NativeOnly {
				in = nil // nothing to say is said as no placement
			}
		}
		got := PlacementToMRI(PlacementFromMRI(in))
		if !proto.Equal(got, in) || (got == nil) != (in == nil) {
			t.Fatalf("round trip gave %v, want %v", got, in)
		}
	}))
}
