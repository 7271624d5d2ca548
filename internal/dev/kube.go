package dev

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/containerimage"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
)

// Kubernetes on anvil dev's Machines (docs/kubeadm.md): with --kube-images, anvil dev
// publishes the control-plane images (make kube-images) in a public folder of its registry
// and gives its QEMU pools a network on which any namespace's Machines pull them; with
// --node-image, it publishes the node image (make node-image).
const (
	// KubeFolder is the registry folder of the control-plane images, readable without a
	// credential (they are built from public sources): a kubeadm node's containerd pulls
	// them as a mirror of registry.k8s.io.
	KubeFolder = "anvil/kube"
	// NodeImageRepository is the node image's repository; its tag is the Kubernetes version.
	NodeImageRepository = "anvil/kubernetes-node"
	// KubeNetwork is the NIC network on which Machines reach the registry at
	// KubeGuestRegistry (and nothing else), open to every namespace.
	KubeNetwork = "anvil-kube"
	// KubeGuestRegistry is the registry's address on KubeNetwork (plain HTTP: the forward
	// ends at the loopback registry).
	KubeGuestRegistry = "10.0.2.100:5000"
)

// kubeNetworks adds KubeNetwork to networks.
func kubeNetworks(networks map[string]qemu.Network, registryHost string) {
	networks[KubeNetwork] = qemu.Network{Forwards: []qemu.NetworkForward{{Guest: KubeGuestRegistry, Target: registryHost}}}
}

// networkAccess is who may join each network anvil dev's QEMU pools serve: builders on
// theirs, every namespace on KubeNetwork (it reaches public images only).
var networkAccess = map[string]computev1alpha1.NetworkAccess{
	BuilderNetwork: {Name: BuilderNetwork, Builders: true},
	KubeNetwork:    {Name: KubeNetwork, Tenants: &computev1alpha1.TenantPolicy{NamespaceSelector: &metav1.LabelSelector{}}},
}

// publishKubeImages pushes every image layout in dir (make kube-images: dir/NAME, each
// named with its tag) to registryHost/KubeFolder/NAME:TAG and returns the banner's line.
func publishKubeImages(ctx context.Context, dir, registryHost string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("the Kubernetes images: %w (run make kube-images)", err)
	}
	var pushed []string
	for _, e := range entries {
		layoutDir := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(layoutDir, "index.json")); !e.IsDir() || err != nil {
			continue
		}
		idx, err := containerimage.ReadLayout(layoutDir)
		if err != nil {
			return "", err
		}
		tag, err := containerimage.LayoutTag(layoutDir)
		if err != nil {
			return "", err
		}
		for _, repository := range kubeRepositories(e.Name()) {
			ref := registryHost + "/" + KubeFolder + "/" + repository + ":" + tag
			if err := containerimage.Push(ctx, idx, ref); err != nil {
				return "", err
			}
			pushed = append(pushed, repository+":"+tag)
		}
	}
	if len(pushed) == 0 {
		return "", fmt.Errorf("the Kubernetes images: %s holds no image layout (run make kube-images)", dir)
	}
	slices.Sort(pushed)
	return fmt.Sprintf("%s/%s/{%s} (no credential needed; at %s on the %s network)",
		registryHost, KubeFolder, strings.Join(pushed, ","), KubeGuestRegistry, KubeNetwork), nil
}

// kubeRepositories are the repositories image is published as under KubeFolder: its name,
// which kubeadm asks a custom imageRepository for, and, where registry.k8s.io keeps it
// elsewhere, that path too, which kubeadm asks for by default and containerd's mirror of
// registry.k8s.io passes on unchanged (CoreDNS is registry.k8s.io/coredns/coredns).
func kubeRepositories(image string) []string {
	if image == "coredns" {
		return []string{"coredns", "coredns/coredns"}
	}
	return []string{image}
}

// publishNodeImage pushes make node-image's disk form (dir/disk/ARCH) as
// NodeImageRepository tagged with dir/KUBERNETES_VERSION and returns the reference pushed.
func publishNodeImage(ctx context.Context, dir, registryHost string) (string, error) {
	version, err := os.ReadFile(filepath.Join(dir, "KUBERNETES_VERSION"))
	if err != nil {
		return "", fmt.Errorf("the node image: %w (run make node-image)", err)
	}
	ref := registryHost + "/" + NodeImageRepository + ":" + strings.TrimSpace(string(version))
	return pushOSImage(ctx, filepath.Join(dir, "disk"), ref, "the node image", "make node-image")
}

// publishKube publishes what of the control-plane images (imagesDir) and the node image
// (nodeDir) is given, and returns the banner's line.
func publishKube(ctx context.Context, imagesDir, nodeDir, registryHost string) (string, error) {
	var lines []string
	if nodeDir != "" {
		node, err := publishNodeImage(ctx, nodeDir, registryHost)
		if err != nil {
			return "", err
		}
		lines = append(lines, "node image "+node)
	}
	if imagesDir != "" {
		images, err := publishKubeImages(ctx, imagesDir, registryHost)
		if err != nil {
			return "", err
		}
		lines = append(lines, "control-plane images "+images)
	}
	return strings.Join(lines, "\n                  "), nil
}
