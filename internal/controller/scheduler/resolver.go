package scheduler

import (
	"context"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imageref"
)

// ImageResolver says which architectures an OS image offers and what it says of itself. A
// nil list of architectures with no error means the image does not restrict the
// architecture; nil annotations with no error mean they are not read (and a Machine
// requiring some is held back, told why).
type ImageResolver interface {
	Architectures(ctx context.Context, image string) ([]computev1alpha1.Architecture, error)
	Annotations(ctx context.Context, image string) (map[string]string, error)
}

// UnrestrictedImages takes every image to offer every architecture; the pool's runtime
// then refuses a Machine whose image has no entry for its architecture (the refusal sends
// it back here, that pool excluded). For images in registries the manager cannot reach.
type UnrestrictedImages struct{}

// Architectures returns nil: no restriction.
func (UnrestrictedImages) Architectures(context.Context, string) ([]computev1alpha1.Architecture, error) {
	return nil, nil
}

// Annotations returns nil: not read, so a Machine with requiredImageAnnotations waits.
func (UnrestrictedImages) Annotations(context.Context, string) (map[string]string, error) {
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
	ctx, cancel := r.bounded(ctx)
	defer cancel()
	return r.Registry.Architectures(ctx, image)
}

// Annotations asks the registry (one lookup with Architectures: the Registry caches both).
func (r RegistryImages) Annotations(ctx context.Context, image string) (map[string]string, error) {
	ctx, cancel := r.bounded(ctx)
	defer cancel()
	return r.Registry.Annotations(ctx, image)
}

func (r RegistryImages) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.Timeout > 0 {
		return context.WithTimeout(ctx, r.Timeout)
	}
	return ctx, func() {}
}
