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
	return pushOSImage(ctx, dir, registryHost+"/"+TestOSRepository, "the test OS", "make testos", nil)
}

// pushOSImage publishes dir (one folder per architecture) as ref: what names the image
// and build the command that makes dir, in errors.
func pushOSImage(ctx context.Context, dir, ref, what, build string, annotations map[string]string) (string, error) {
	sources := map[computev1alpha1.Architecture]string{}
	for _, arch := range computev1alpha1.KnownArchitectures {
		sub := filepath.Join(dir, string(arch))
		if _, err := os.Stat(sub); err == nil {
			sources[arch] = sub
		}
	}
	if len(sources) == 0 {
		return "", fmt.Errorf("%s: %s holds no architecture's folder (amd64/, arm64/): run %s", what, dir, build)
	}
	pushed, _, err := osimage.PushDirs(ctx, ref, sources, annotations)
	if err != nil {
		return "", fmt.Errorf("publishing %s from %s: %w", what, dir, err)
	}
	return pushed, nil
}
