package scheduler

import (
	"context"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imageref"
)

// ImageResolver says which architectures an OS image offers. A nil list with no error
// means the image does not restrict the architecture.
type ImageResolver interface {
	Architectures(ctx context.Context, image string) ([]computev1alpha1.Architecture, error)
}

// UnrestrictedImages takes every image to offer every architecture; the pool's runtime
// then refuses a Machine whose image has no entry for its architecture (the refusal sends
// it back here, that pool excluded). For images in registries the manager cannot reach.
type UnrestrictedImages struct{}

// Architectures returns nil: no restriction.
func (UnrestrictedImages) Architectures(context.Context, string) ([]computev1alpha1.Architecture, error) {
	return nil, nil
}

// RegistryImages reads the architectures from the image's registry: the platforms of an
// index, or a single image's own architecture. Answers are cached by the Registry.
type RegistryImages struct {
	Registry *imageref.Registry
	// Timeout bounds one lookup, so an unreachable registry does not hold a worker.
	Timeout time.Duration
}

// Architectures asks the registry.
func (r RegistryImages) Architectures(ctx context.Context, image string) ([]computev1alpha1.Architecture, error) {
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	return r.Registry.Architectures(ctx, image)
}
