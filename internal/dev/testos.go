package dev

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// TestOSRepository is where anvil dev publishes the test OS in its registry; the samples
// refer to it by tag.
const TestOSRepository = "anvil/testos:latest"

// pushTestOS publishes the test OS built by `make testos` (one folder per architecture
// under dir) as one multi-arch image. Pushing again is cheap: the registry has the blobs.
func pushTestOS(ctx context.Context, dir, registryHost string) (string, error) {
	sources := map[computev1alpha1.Architecture]string{}
	for _, arch := range computev1alpha1.KnownArchitectures {
		sub := filepath.Join(dir, string(arch))
		if _, err := os.Stat(sub); err == nil {
			sources[arch] = sub
		}
	}
	if len(sources) == 0 {
		return "", fmt.Errorf("--test-os %s holds no architecture's folder (amd64/, arm64/): run make testos", dir)
	}
	pushed, _, err := osimage.PushDirs(ctx, registryHost+"/"+TestOSRepository, sources)
	if err != nil {
		return "", fmt.Errorf("publishing the test OS from %s: %w", dir, err)
	}
	return pushed, nil
}
