package dev

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/metal/pool"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/runtime/metal"
)

// The bare-metal pool anvil dev runs when Ironic is installed: Ironic's fake hardware
// behind real Ironic, so the whole path from Host to provisioned Machine can be tried
// without servers.
const (
	MetalPoolName  = "dev-metal"
	MetalNamespace = "anvil-metal"
	// MetalDiskRepository holds a small raw disk per architecture for the sample bare-metal
	// Machine (the test OS boots from kernel and initramfs; servers are written a disk).
	MetalDiskRepository = "anvil/metal-disk:latest"
)

// metalHostsPerArch is how many fake-hardware Hosts of each architecture anvil dev enrols.
const metalHostsPerArch = 2

// ironicMissing says why there is no metal pool, or "" when Ironic is installed.
func ironicMissing() string {
	for _, program := range []string{"ironic", "ironic-dbsync"} {
		if _, err := exec.LookPath(program); err != nil {
			return fmt.Sprintf("no bare-metal pool (%s not installed: %s)", program, ironic.InstallHint)
		}
	}
	return ""
}

// poolServer closes the whole pool (runtime, site, Ironic) when the served runtime closes.
type poolServer struct {
	*metal.Runtime
	pool *pool.Pool
}

func (p poolServer) Close() { _ = p.pool.Stop() }

// StartMetalPool enrols fake-hardware Hosts and a HostPolicy letting every namespace use
// them, runs Ironic, the Host controller and the metal runtime (as the site's
// ServiceAccount), and a poollet for the pool (as the poollet's).
func StartMetalPool(ctx context.Context, cfg *rest.Config, c client.Client, stateDir, imageListen, espImage string, wipe site.Wipe, images osimage.CacheOptions, log logr.Logger) (<-chan error, error) {
	if err := ensureNamespace(ctx, c, MetalNamespace); err != nil {
		return nil, err
	}
	if err := SeedMetal(ctx, c); err != nil {
		return nil, err
	}
	// The site (Host controller and metal runtime) runs as its own ServiceAccount with the
	// shipped metal roles, as on a site host: Hosts and Secrets of its namespace only.
	imp, err := rbac.InstallMetal(ctx, c, MetalNamespace)
	if err != nil {
		return nil, fmt.Errorf("the identity of the metal site: %w", err)
	}
	dir := filepath.Join(stateDir, "pools", MetalPoolName)
	p, err := pool.Start(ctx, pool.Config{
		Site: site.Config{RestConfig: impersonating(cfg, imp), Namespace: MetalNamespace, StateDir: dir, ESPImage: espImage, Wipe: wipe,
			Logger: log.WithName("site").WithValues("pool", MetalPoolName)},
		Name: MetalPoolName, ImageCacheDir: filepath.Join(dir, "cache"), ImageCache: images, ImageListen: imageListen,
		ConsoleDir: filepath.Join(dir, "consoles"),
		Logger:     log.WithName("runtime").WithValues("pool", MetalPoolName),
	})
	if err != nil {
		return nil, err
	}
	return runPool(ctx, cfg, stateDir, MetalPoolName, poolServer{Runtime: p.Runtime, pool: p}, "metal", images.Network)
}

// startDevMetal starts the metal pool when Ironic is installed, or says why it did not:
// fake-hardware Hosts, and o.EmulatedServers servers behind the BMC emulator.
func startDevMetal(ctx context.Context, cfg *rest.Config, c client.Client, stateDir, registryHost string, images osimage.CacheOptions, o Options, pools *poolSet) error {
	if missing := ironicMissing(); missing != "" {
		pools.names = append(pools.names, missing)
		return nil
	}
	disk, err := PushMetalDisk(ctx, stateDir, registryHost)
	if err != nil {
		return err
	}
	if err := ensureNamespace(ctx, c, MetalNamespace); err != nil {
		return err
	}
	emulated := ""
	if specs := EmulatedSpecs(o.EmulatedServers, o.EmulatedARM64Servers); len(specs) > 0 {
		if o.EmulatedARM64Servers > 0 && o.ESPImage == "" {
			return fmt.Errorf("arm64 emulated servers boot UEFI: Ironic's UEFI boot ISOs need an ESP image (--esp-image; make esp builds bin/esp.img)")
		}
		e, err := startEmulatedServers(ctx, c, stateDir, specs, o.BMCPort, ctrl.Log)
		if err != nil {
			return err
		}
		emulated = fmt.Sprintf(", %d emulated amd64 and %d arm64 servers (Redfish BMC on 127.0.0.1:%d; consoles %s; servers keep running after Ctrl-C)",
			o.EmulatedServers, o.EmulatedARM64Servers, o.BMCPort, filepath.Dir(filepath.Dir(e.ConsolePath(specs[0].Name))))
	}
	if o.EraserDir == "" {
		return fmt.Errorf("the bare-metal pool wipes released servers with anvil's eraser: make eraser builds bin/eraser (or --eraser; --metal-pool=false runs without the pool)")
	}
	wipe := site.Wipe{Method: site.WipeEraser, EraserDir: o.EraserDir}
	errs, err := StartMetalPool(ctx, cfg, c, stateDir, fmt.Sprintf("127.0.0.1:%d", o.MetalImagePort), o.ESPImage, wipe, images, ctrl.Log)
	if err != nil {
		return fmt.Errorf("starting pool %s: %w", MetalPoolName, err)
	}
	pools.add(fmt.Sprintf("%s (Ironic: %d fake-hardware Hosts%s, in namespace %s; sample disk %s)",
		MetalPoolName, 2*metalHostsPerArch, emulated, MetalNamespace, disk), errs)
	return nil
}

// SeedMetal creates the dev Hosts (fake hardware, in MetalNamespace) and a HostPolicy
// letting every namespace use them, when missing.
func SeedMetal(ctx context.Context, c client.Client) error {
	policy := &metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: MetalNamespace, Name: "everyone"},
		Spec: metalv1alpha1.HostPolicySpec{NamespaceSelector: &metav1.LabelSelector{}}}
	objs := []client.Object{policy}
	i := 0
	for _, arch := range []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64} {
		for n := 0; n < metalHostsPerArch; n++ {
			i++
			name := fmt.Sprintf("server-%s-%d", arch, n+1)
			objs = append(objs, &metalv1alpha1.Host{
				ObjectMeta: metav1.ObjectMeta{Namespace: MetalNamespace, Name: name, Labels: map[string]string{"rack": "dev"}},
				Spec: metalv1alpha1.HostSpec{
					BMC:            metalv1alpha1.BMC{Address: "fake://" + name + "?cpus=8&memory_mb=16384&local_gb=100"},
					BootMACAddress: fmt.Sprintf("52:54:00:ad:00:%02x", i),
					Architecture:   arch,
				},
			})
		}
	}
	for _, o := range objs {
		if err := client.IgnoreAlreadyExists(c.Create(ctx, o)); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// PushMetalDisk publishes a small raw disk per architecture, for the sample bare-metal
// Machine: fake hardware writes nothing, but anvil checks and serves the disk as it would
// for a real server.
func PushMetalDisk(ctx context.Context, stateDir, registryHost string) (string, error) {
	sources := map[computev1alpha1.Architecture]string{}
	for _, arch := range []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64} {
		dir := filepath.Join(stateDir, "metal-disk", string(arch))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		disk := make([]byte, 1<<20)
		copy(disk, "anvil dev bare-metal disk, "+string(arch)+"\n")
		if err := os.WriteFile(filepath.Join(dir, osimage.DiskRawFile), disk, 0o644); err != nil {
			return "", err
		}
		sources[arch] = dir
	}
	pushed, _, err := osimage.PushDirs(ctx, registryHost+"/"+MetalDiskRepository, sources, nil)
	if err != nil {
		return "", fmt.Errorf("publishing the sample bare-metal disk: %w", err)
	}
	return pushed, nil
}
