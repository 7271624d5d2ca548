package scheduler

import (
	"context"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// StaticImages maps image references to their architectures; other images are
// unrestricted. None carries annotations.
type StaticImages map[string][]computev1alpha1.Architecture

// Architectures looks the image up.
func (s StaticImages) Architectures(_ context.Context, image string) ([]computev1alpha1.Architecture, error) {
	return s[image], nil
}

// Annotations: none.
func (s StaticImages) Annotations(context.Context, string) (map[string]string, error) {
	return map[string]string{}, nil
}
