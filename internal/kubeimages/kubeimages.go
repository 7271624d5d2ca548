// Package kubeimages publishes the images a kubeadm cluster pulls, as make kube-images builds
// them (hack/kubeimages, docs/images.md): one OCI image layout per image beside DIGESTS, the
// file a build writes last. The one push for `hack/kubeimages push` and `anvil dev
// --kube-images`, so a registry either fills serves the same repositories.
package kubeimages

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/anvil-dev/anvil/internal/containerimage"
)

// Image is one image of a finished build: its name (the layout's folder), tag and the
// digest of its index.
type Image struct {
	Name, Tag, Digest string
}

// Read is what dir's DIGESTS lists ("NAME:TAG DIGEST" a line). A folder without DIGESTS
// holds no finished build, whatever layouts are in it.
func Read(dir string) ([]Image, error) {
	f, err := os.Open(filepath.Join(dir, "DIGESTS"))
	if err != nil {
		return nil, fmt.Errorf("%w: %s holds no finished build of kubeadm's images (run make kube-images)", err, dir)
	}
	defer f.Close()
	var images []Image
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s: %q is not NAME:TAG DIGEST", f.Name(), s.Text())
		}
		name, tag, ok := strings.Cut(fields[0], ":")
		if !ok || name == "" || tag == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("%s: %q is not NAME:TAG DIGEST", f.Name(), s.Text())
		}
		images = append(images, Image{Name: name, Tag: tag, Digest: fields[1]})
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(images) == 0 {
		return nil, fmt.Errorf("%s lists no image (run make kube-images)", f.Name())
	}
	return images, nil
}

// Repositories are the repositories image is pushed as under a prefix: its name, which
// kubeadm asks a custom imageRepository for, and where registry.k8s.io keeps it elsewhere,
// that path too, which kubeadm asks for by default and a mirror of registry.k8s.io
// (containerd's hosts file) passes on unchanged: CoreDNS is registry.k8s.io/coredns/coredns.
func Repositories(image string) []string {
	if image == "coredns" {
		return []string{"coredns", "coredns/coredns"}
	}
	return []string{image}
}

// Push sends every image of dir's finished build to prefix/REPOSITORY:TAG for each of its
// Repositories (credentials from DOCKER_CONFIG), refusing a layout whose index is not the
// digest DIGESTS names. It returns what it pushed, as REPOSITORY:TAG under prefix.
func Push(ctx context.Context, dir, prefix string) ([]string, error) {
	images, err := Read(dir)
	if err != nil {
		return nil, err
	}
	// Every layout is checked before anything is pushed: a registry gets a whole build or
	// nothing of it.
	indexes := make([]v1.ImageIndex, len(images))
	for i, im := range images {
		idx, err := containerimage.ReadLayout(filepath.Join(dir, im.Name))
		if err != nil {
			return nil, err
		}
		d, err := idx.Digest()
		if err != nil {
			return nil, err
		}
		if d.String() != im.Digest {
			return nil, fmt.Errorf("%s: the layout's index is %s, DIGESTS says %s: a build did not finish (run make kube-images)", im.Name, d, im.Digest)
		}
		indexes[i] = idx
	}
	prefix = strings.TrimSuffix(prefix, "/")
	var pushed []string
	for i, im := range images {
		for _, repository := range Repositories(im.Name) {
			if err := containerimage.Push(ctx, indexes[i], prefix+"/"+repository+":"+im.Tag); err != nil {
				return pushed, err
			}
			pushed = append(pushed, repository+":"+im.Tag)
		}
	}
	return pushed, nil
}
