package dev

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/kubeimages"
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
	KubeGuestRegistry = builderGuestRegistry
)

// addKubeNetwork adds KubeNetwork to networks.
func addKubeNetwork(networks map[string]qemu.Network, registryHost string) {
	networks[KubeNetwork] = qemu.Network{Forwards: []qemu.NetworkForward{{Guest: KubeGuestRegistry, Target: registryHost}}}
}

// publishKubeImages pushes make kube-images' finished build in dir to
// registryHost/KubeFolder and returns the banner's line.
func publishKubeImages(ctx context.Context, dir, registryHost string) (string, error) {
	pushed, err := kubeimages.Push(ctx, dir, registryHost+"/"+KubeFolder)
	if err != nil {
		return "", fmt.Errorf("publishing the Kubernetes images: %w", err)
	}
	return fmt.Sprintf("%s/%s/{%s} (no credential needed; at %s on the %s network)",
		registryHost, KubeFolder, strings.Join(pushed, ","), KubeGuestRegistry, KubeNetwork), nil
}

// publishNodeImage pushes make node-image's disk form (dir/disk/ARCH) as
// NodeImageRepository tagged with dir/KUBERNETES_VERSION and returns the reference pushed.
func publishNodeImage(ctx context.Context, dir, registryHost string) (string, error) {
	version, err := os.ReadFile(filepath.Join(dir, "KUBERNETES_VERSION"))
	if err != nil {
		return "", fmt.Errorf("the node image: %w (run make node-image)", err)
	}
	v := strings.TrimSpace(string(version))
	// The image says which Kubernetes it carries: a node's template requires it
	// (requiredImageAnnotations), so an image without kubeadm never boots as a node.
	return pushOSImage(ctx, filepath.Join(dir, "disk"), registryHost+"/"+NodeImageRepository+":"+v, "the node image", "make node-image",
		map[string]string{computev1alpha1.ImageAnnotationKubernetesVersion: v})
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
