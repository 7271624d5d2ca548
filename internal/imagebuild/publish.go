package imagebuild

import (
	"sort"

	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
)

// Result is one architecture's build as it stands.
type Result struct {
	Architecture string
	Phase        imagesv1alpha1.BuildPhase
	Digest       string // set when Reused or Succeeded
}

// Publication is what a build may publish.
type Publication struct {
	// Wait: some architecture is still building; publish nothing yet.
	Wait bool
	// Entries to put in the index, architecture to image digest; empty when nothing may
	// be published.
	Entries map[string]string
	// CarriedForward are failed architectures whose previous entry is kept (CarryForward).
	CarriedForward []string
	// Missing are failed architectures that have no entry at all: left out of the index
	// under CarryForward, the reason nothing is published under AllArchitectures.
	Missing []string
}

// Publish decides what a build publishes once its architectures end. previous is the
// entry each architecture has in the index published now.
func Publish(policy imagesv1alpha1.PublishPolicy, results []Result, previous map[string]string) Publication {
	var p Publication
	entries := map[string]string{}
	for _, r := range results {
		switch {
		case !r.Phase.Done():
			return Publication{Wait: true}
		case r.Phase == imagesv1alpha1.BuildPhaseFailed:
			if d, ok := previous[r.Architecture]; ok && policy == imagesv1alpha1.PublishCarryForward {
				entries[r.Architecture] = d
				p.CarriedForward = append(p.CarriedForward, r.Architecture)
			} else {
				p.Missing = append(p.Missing, r.Architecture)
			}
		default:
			entries[r.Architecture] = r.Digest
		}
	}
	sort.Strings(p.CarriedForward)
	sort.Strings(p.Missing)
	if policy == imagesv1alpha1.PublishAllArchitectures && len(p.Missing) > 0 {
		return p
	}
	if len(entries) > 0 {
		p.Entries = entries
	}
	return p
}
