package scheduler

import (
	"context"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// ImageResolver says which architectures an OS image offers. A nil list with no error
// means the image does not restrict the architecture.
type ImageResolver interface {
	Architectures(ctx context.Context, image string) ([]computev1alpha1.Architecture, error)
}

// UnrestrictedImages is the resolver used until a registry backs it: every image is
// taken to offer every architecture, and the pool's runtime refuses a Machine whose image
// has no entry for its architecture (the refusal sends it back here, that pool excluded).
type UnrestrictedImages struct{}

// Architectures returns nil: no restriction.
func (UnrestrictedImages) Architectures(context.Context, string) ([]computev1alpha1.Architecture, error) {
	return nil, nil
}
