package qemu

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imageref"
	"github.com/anvil-dev/anvil/internal/mri/conformance"
	"github.com/anvil-dev/anvil/internal/nocloud"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// fuzzRegistry is the registry name the fuzz test's images carry; fuzzImages puts the
// embedded registry's address in its place.
const fuzzRegistry = "registry.fuzz"

// FuzzMRI sends requests of fuzzed bytes to the qemu runtime through its gRPC server
// (conformance.Fuzz), with its real image cache and index reader on an embedded registry.
// The registry's one image has an amd64 entry that is not an OS image: a create of it
// passes the index check and its pull fails for good (NotOSImage), so no input ever boots
// a guest, which Check makes sure of.
func FuzzMRI(f *testing.F) {
	reg, err := registry.Start(context.Background(), 0, "", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { reg.Stop() })
	digest := pushNotOSImage(f, reg.Host+"/anvil/os:1")

	state := f.TempDir()
	cache, err := osimage.NewCache(filepath.Join(state, "cache"), osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}})
	if err != nil {
		f.Fatal(err)
	}
	images := &fuzzImages{host: reg.Host, images: cache,
		index: &imageref.Registry{Transport: registrynet.Policy{Allow: registrynet.Loopback}.Transport()}}
	cfg := Config{
		Name: "qemu", StateDir: filepath.Join(state, "state"),
		Architectures: []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64},
		Images:        images, Index: images, Seeds: nocloud.WriteISO, Logger: logr.Discard(),
	}
	f.Cleanup(func() { killQEMUsUnder(f, cfg.StateDir) })
	s := conformance.Serve(f, "unix://"+filepath.Join(state, "mri.sock"), func() (conformance.Runtime, error) { return New(cfg) })
	conformance.Fuzz(f, conformance.FuzzTarget{
		Served: s,
		Spec: func() *mriv1alpha1.MachineSpec {
			return machineSpec(testImage{Reference: fuzzRegistry + "/anvil/os:1", Digest: digest}, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
		},
		Timeout: 30 * time.Second,
		Check: func(t *testing.T) {
			if pids := qemusUnder(cfg.StateDir); len(pids) > 0 {
				t.Fatalf("QEMU processes %v run: a fuzz input booted a guest", pids)
			}
		},
	})
}

// pushNotOSImage pushes an image index whose amd64 entry is an ordinary container image,
// not an anvil OS image, and returns its digest.
func pushNotOSImage(f *testing.F, ref string) string {
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{Architecture: "amd64", OS: "linux"})
	if err != nil {
		f.Fatal(err)
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	digest, err := osimage.Push(context.Background(), ref, idx)
	if err != nil {
		f.Fatal(err)
	}
	return digest
}

// fuzzImages is the runtime's image cache and index reader, reaching only the embedded
// registry: a reference to fuzzRegistry is read from it, and any other registry fails as
// an unreachable one would, so fuzzed references never leave the machine.
type fuzzImages struct {
	host   string
	images Images
	index  ImageIndex
}

func (i *fuzzImages) local(reference string) (string, error) {
	ref, err := osimage.ParseReference(reference)
	if err != nil {
		return "", err
	}
	if reg := ref.Context().RegistryStr(); reg != fuzzRegistry {
		return "", fmt.Errorf("registry %s is not reached while fuzzing", reg)
	}
	return i.host + strings.TrimPrefix(reference, fuzzRegistry), nil
}

func (i *fuzzImages) Pull(ctx context.Context, reference, digest string, arch computev1alpha1.Architecture) (osimage.Files, error) {
	local, err := i.local(reference)
	if err != nil {
		return osimage.Files{}, err
	}
	return i.images.Pull(ctx, local, digest, arch)
}

func (i *fuzzImages) Architectures(ctx context.Context, reference string) ([]computev1alpha1.Architecture, error) {
	local, err := i.local(reference)
	if err != nil {
		return nil, err
	}
	return i.index.Architectures(ctx, local)
}
