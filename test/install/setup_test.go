package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/config"
	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/containerimage"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/test/cluster"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/harness"
)

// The node labels config/default's hypervisor DaemonSets and config/metal-site's Deployment
// select.
const (
	hypervisorLabel = "node-restriction.kubernetes.io/anvil-hypervisor=qemu"
	siteLabel       = "node-restriction.kubernetes.io/anvil-metal-site=metal"
)

// site is the test's whole set-up: a node, a registry holding anvil's images and the test
// OS, and the overlay of config/default and config/metal-site a user would write.
type site struct {
	env        devproc.Env
	cluster    *cluster.Cluster
	kubeconfig string
	registry   string
	testOS     string
	overlay    string
}

func (s *site) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := s.env.Kubectl(t, s.kubeconfig, "", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

func (s *site) apply(t *testing.T, yaml string) {
	t.Helper()
	if out, err := s.env.Kubectl(t, s.kubeconfig, yaml, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// startSite starts everything but anvil: the node (its host paths /run/anvil and
// /var/lib/anvil restored after, as the kubelet's are), a registry on loopback with anvil's
// images and the test OS, and writes the overlay.
func startSite(t *testing.T, ctx context.Context) *site {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := harness.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	s := &site{env: devproc.Env{RepoRoot: root, BinDir: bin}}
	for _, name := range config.Images {
		if _, err := os.Stat(filepath.Join(bin, "images", name)); err != nil {
			t.Fatalf("anvil's image %s is missing from %s/images: run make images (%v)", name, bin, err)
		}
	}
	if _, err := os.Stat(filepath.Join(bin, "testos", "amd64")); err != nil {
		t.Fatalf("the test OS is missing: run make testos (%v)", err)
	}

	reg, err := registry.Start(ctx, 0, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	s.registry = reg.Host
	digests := map[string]string{}
	for _, name := range config.Images {
		idx, err := containerimage.ReadLayout(filepath.Join(bin, "images", name))
		if err != nil {
			t.Fatalf("reading image %s (make images): %v", name, err)
		}
		if err := containerimage.Push(ctx, idx, reg.Host+"/anvil/"+name+":test"); err != nil {
			t.Fatalf("pushing image %s: %v", name, err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests[name] = d.String()
	}
	s.testOS, _, err = osimage.PushDirs(ctx, reg.Host+"/anvil/testos:latest",
		map[computev1alpha1.Architecture]string{computev1alpha1.ArchitectureAMD64: filepath.Join(bin, "testos", "amd64")}, nil)
	if err != nil {
		t.Fatalf("publishing the test OS: %v", err)
	}
	s.overlay = writeOverlay(t, root, reg.Host, digests)

	c, err := cluster.Start(ctx, cluster.Options{BinDir: bin, HostPaths: []string{"/run/anvil", "/var/lib/anvil"}})
	if err != nil {
		t.Fatalf("starting the test cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the test cluster: %v", err)
		}
	})
	s.cluster, s.kubeconfig = c, c.Kubeconfig()
	return s
}

// writeOverlay is what a user writes on top of config/default and config/metal-site for
// this site: where the images are (by digest) and that the registry on loopback may be
// read. The manager is no hostNetwork Pod, so it cannot reach that registry to learn an
// image's architectures: it assumes every one (the runtime refuses a wrong one).
func writeOverlay(t *testing.T, root, registryHost string, digests map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	allow := "--allow-registry=" + registryHost
	// One node is everything here: the manager and the site run on the hypervisor node,
	// which the shipped manifests refuse (config/placement_test.go checks they do).
	o := config.Overlay{
		Bases:      []string{filepath.Join(root, "config/default"), filepath.Join(root, "config/metal-site")},
		Images:     map[string]string{},
		SingleNode: true,
		Args: map[string][]string{
			"Deployment/anvil-controller-manager/0": {"--image-architectures=any"},
			// TCG, as every other test's guests: the shipped --accel=auto picks KVM when its
			// probe guest runs, and on some hosts real kernels then stop at a "KVM internal
			// error" (docs/cluster-install.md).
			"DaemonSet/anvil-qemu-runtime/0": {allow, "--accel=tcg"},
			"DaemonSet/anvil-qemu-poollet/0": {allow, "--interval=2s"},
			"Deployment/anvil-metal-site/0":  {allow},
			"Deployment/anvil-metal-site/1":  {allow, "--interval=2s"},
		},
	}
	for _, name := range config.Images {
		o.Images[name] = registryHost + "/anvil/" + name + "@" + digests[name]
	}
	if err := o.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startEmulatedServer runs the BMC emulator with one amd64 server on loopback (the site Pod
// has the node's network) and enrols it as a Host of the site, with a policy letting
// every namespace use it.
func (s *site) startEmulatedServer(t *testing.T) *bmcemu.Emulator {
	t.Helper()
	spec := bmcemu.Spec{Name: "server-1", CPUs: 2, MemoryMiB: 1024, DiskGiB: 8, MAC: "52:54:00:e0:10:01",
		Architecture: computev1alpha1.ArchitectureAMD64}
	dir := t.TempDir()
	e, err := bmcemu.Start(bmcemu.Config{StateDir: dir, Username: "admin", Password: "install-test",
		Servers: []bmcemu.Spec{spec}, Logger: logr.Discard()})
	if err != nil {
		t.Fatalf("starting the BMC emulator: %v", err)
	}
	t.Cleanup(func() {
		_ = e.Close()
		_ = bmcemu.PowerOffAll(dir) // servers outlive their BMC
	})
	s.apply(t, fmt.Sprintf(`
apiVersion: v1
kind: Secret
metadata: {name: bmc, namespace: anvil-metal}
stringData: {username: admin, password: install-test}
---
apiVersion: metal.anvil.dev/v1alpha1
kind: HostPolicy
metadata: {name: everyone, namespace: anvil-metal}
spec:
  namespaceSelector: {}
---
apiVersion: metal.anvil.dev/v1alpha1
kind: Host
metadata: {name: %s, namespace: anvil-metal}
spec:
  bmc:
    address: %s
    credentialsSecretRef: {name: bmc}
  bootMACAddress: %q
  architecture: amd64
  bootMode: %s
`, spec.Name, e.Address(spec.Name), spec.MAC, spec.BootMode()))
	return e
}
