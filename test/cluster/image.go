package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/anvil-dev/anvil/internal/containerimage"
	"github.com/anvil-dev/anvil/test/harness"
)

// PauseImage is the sandbox image containerd runs for every Pod, built from
// hack/kubeimages/pause (the kubeadm clusters' pause too) at Start and imported into
// containerd (there is no registry to pull one from).
const PauseImage = "anvil.dev/test-cluster/pause:1"

// BuildStatic builds the main package pkg of this checkout (e.g. "./test/cluster/probe")
// as a static linux binary of this machine's architecture into out.
func BuildStatic(pkg, out string) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if raw, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v\n%s", pkg, err, raw)
	}
	return nil
}

// BinaryImage is an image of one static binary at /NAME (NAME its file name), its
// entrypoint, for this machine's architecture: all a test Pod or the sandbox needs.
// (internal/containerimage builds anvil's own images.)
func BinaryImage(binary string) (v1.Image, error) {
	raw, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(binary)
	var layer bytes.Buffer
	if err := containerimage.WriteTar(&layer, []containerimage.Entry{containerimage.File(base, 0o755, raw)}, time.Unix(0, 0)); err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layer.Bytes())), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = []string{"/" + base}
	return mutate.ConfigFile(img, cfg)
}

// importPause builds the pause binary and image and imports it into containerd's CRI
// namespace under PauseImage.
func importPause(ctx context.Context, dir, socket string) error {
	bin := filepath.Join(dir, "images", "pause")
	if err := BuildStatic("./hack/kubeimages/pause", bin); err != nil {
		return err
	}
	img, err := BinaryImage(bin)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(PauseImage)
	if err != nil {
		return err
	}
	archive := filepath.Join(dir, "images", "pause.tar")
	if err := tarball.WriteToFile(archive, ref, img); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "ctr", "--address", socket, "-n", "k8s.io", "images", "import", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %v: %s", archive, err, out)
	}
	return nil
}
