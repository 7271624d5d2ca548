package sites

import (
	"context"
	"os"
	"path/filepath"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// pushImage pushes an amd64 anvil OS image (a small raw disk: fake pools boot nothing)
// to reference and returns it.
func pushImage(ctx context.Context, reference, dir string) (string, error) {
	disk := filepath.Join(dir, "sites-os.raw")
	if err := os.WriteFile(disk, []byte("the sites' test disk"), 0o644); err != nil {
		return "", err
	}
	img, err := osimage.Build(osimage.Files{Architecture: computev1alpha1.ArchitectureAMD64, DiskFormat: osimage.DiskFormatRaw, Disk: disk})
	if err != nil {
		return "", err
	}
	idx, err := osimage.Index(img)
	if err != nil {
		return "", err
	}
	if _, err := osimage.Push(ctx, reference, idx); err != nil {
		return "", err
	}
	return reference, nil
}
