package imagebuild

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// TagName is a tag reference in the one spelling both sides of a comparison use (registry,
// repository and tag, defaults filled in), or "" when reference is not a tag reference: a
// Machine pinned by digest asked for that image and no other, so no newer one concerns it.
func TagName(reference string) string {
	tag, err := name.NewTag(reference)
	if err != nil {
		return ""
	}
	return tag.Name()
}

// Currency is what a Machine's ImageUpToDate condition is decided from.
type Currency struct {
	// SpecImage is the Machine's spec.image now; Booted what it runs. Never says the
	// Machine keeps what it booted (imageUpdatePolicy Never).
	SpecImage string
	Never     bool
	Booted    computev1alpha1.BootedImage
	// Architecture the machine runs.
	Architecture computev1alpha1.Architecture
	// Output is true when SpecImage names an OSImage's output tag; OSImage is its name.
	Output  bool
	OSImage string
	// Published is the entry that OSImage publishes for Architecture ("" when none yet).
	Published string
	// BootedEntry is the entry of Booted.Digest for Architecture; "" when it could not be
	// read, with EntryError saying why.
	BootedEntry string
	EntryError  error
}

// ImageUpToDate decides the condition, or nil when the Machine should carry none: its image
// is not an OSImage's output and its spec still names what it booted.
func ImageUpToDate(r Currency) *metav1.Condition {
	cond := func(status metav1.ConditionStatus, reason, format string, args ...any) *metav1.Condition {
		return &metav1.Condition{Type: computev1alpha1.ConditionImageUpToDate, Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	if r.SpecImage != r.Booted.Reference && r.Never {
		return cond(metav1.ConditionFalse, computev1alpha1.ReasonImageChanged,
			"spec.image is %s but the machine runs %s: imageUpdatePolicy Never keeps the booted image; set it to Reimage to boot the new one",
			r.SpecImage, r.Booted.Reference)
	}
	if r.SpecImage != r.Booted.Reference {
		return cond(metav1.ConditionFalse, computev1alpha1.ReasonImageChanged,
			"spec.image is %s but the machine runs %s: it is being reimaged (see the Reimaging condition)",
			r.SpecImage, r.Booted.Reference)
	}
	switch {
	case !r.Output:
		return nil
	case r.Published == "":
		return cond(metav1.ConditionTrue, computev1alpha1.ReasonImageCurrent,
			"OSImage %s publishes no %s entry; the machine keeps %s", r.OSImage, r.Architecture, r.Booted.Digest)
	case r.EntryError != nil:
		return cond(metav1.ConditionUnknown, computev1alpha1.ReasonImageUnknown,
			"reading the booted image %s: %v", r.Booted.Digest, r.EntryError)
	case r.BootedEntry == r.Published:
		return cond(metav1.ConditionTrue, computev1alpha1.ReasonImageCurrent,
			"runs %s, the %s entry OSImage %s publishes", r.Published, r.Architecture, r.OSImage)
	case r.Never:
		return cond(metav1.ConditionFalse, computev1alpha1.ReasonNewerImagePublished,
			"OSImage %s publishes %s for %s; the machine runs %s: imageUpdatePolicy Never keeps it out of the OSImage's rollout; set it to Reimage to move it",
			r.OSImage, r.Published, r.Architecture, r.BootedEntry)
	default:
		return cond(metav1.ConditionFalse, computev1alpha1.ReasonNewerImagePublished,
			"OSImage %s publishes %s for %s; the machine runs %s: the OSImage's rollout reimages it in its turn (see the OSImage's RollingOut condition)",
			r.OSImage, r.Published, r.Architecture, r.BootedEntry)
	}
}
