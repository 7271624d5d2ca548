package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/config/admission"
	"github.com/anvil-dev/anvil/config/crd"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/consoleapi"
	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/internal/manifest"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/ui"
)

// Options configure a dev environment.
type Options struct {
	ControlPlane controlplane.Config
	// ApplyDirs are folders of manifests whose objects are created when missing.
	ApplyDirs []string
	Manager   manager.Options
	// FakePools are run in-process, each a fake runtime and its poollet.
	FakePools []FakePool
	// QemuPools runs, in-process, a qemu runtime and its poollet for each architecture
	// whose QEMU is installed.
	QemuPools bool
	// QemuArchitectures, when not empty, limits the QEMU pools to these architectures.
	QemuArchitectures []computev1alpha1.Architecture
	// MetalPool runs, in-process, Ironic with fake-hardware Hosts, the Host controller, the
	// metal runtime and its poollet, when Ironic is installed.
	MetalPool bool
	// MetalImagePort is the loopback port the bare-metal pool serves OS disks on.
	MetalImagePort int
	// EmulatedServers is how many QEMU servers behind a Redfish BMC emulator the metal
	// pool gets beside its fake-hardware Hosts (amd64, booting BIOS).
	EmulatedServers int
	// EmulatedARM64Servers is how many arm64 ones (UEFI) it gets; they need ESPImage.
	EmulatedARM64Servers int
	// ESPImage is the EFI system partition image of the UEFI boot ISOs Ironic builds (make
	// esp), needed by Hosts that boot UEFI.
	ESPImage string
	// EraserDir is the disk eraser (make eraser: bin/eraser) the bare-metal pool deploys on
	// a released server before anyone else gets it.
	EraserDir string
	// BMCPort is the loopback port of the emulated servers' BMC.
	BMCPort int
	// PackageProxy is an HTTP proxy (host:port on this machine) for packages that builders
	// reach on their network (apt in RUN steps); "" for none.
	PackageProxy string
	// RegistryPort is the loopback port of the embedded OCI registry; its blobs are kept
	// in the state directory.
	RegistryPort int
	// TestOSDir, when set, holds the test OS (make testos), published to the registry as
	// TestOSRepository.
	TestOSDir string
	// DebianDir, when set, holds the Debian image (make debian: disk/ARCH and ram/ARCH),
	// published as DebianRepository and DebianRAMRepository, with the samples' login.
	DebianDir string
	// KubeImagesDir, when set, holds the Kubernetes control-plane images (make
	// kube-images), published in KubeFolder, which anyone reads, and reached by Machines on
	// KubeNetwork.
	KubeImagesDir string
	// NodeImageDir, when set, holds the Kubernetes node image (make node-image), published
	// as NodeImageRepository.
	NodeImageDir string
	// AgentsDir, when set with TestOSDir, holds the build agent per architecture (make
	// agents); the test OS with the agent added is published as BuilderRepository and OS
	// image builds are turned on.
	AgentsDir string
	// CAPI runs Cluster API beside anvil: its core manager and kubeadm bootstrap and
	// control-plane providers (from ControlPlane.BinDir, built by make tools) and anvil's
	// provider, installed as clusterctl init would (docs/capi.md, "Quick start").
	CAPI bool
	// UIAddress is where anvil ui (docs/ui.md) serves the fleet, as dev's admin sees it: a
	// loopback host:port (port 0: any); "" for no UI.
	UIAddress string
	// Out receives the human-readable progress and summary of what started and where.
	Out io.Writer
}

// Run starts everything, prints where it is, and blocks until ctx ends (Ctrl-C, SIGTERM) or
// a part fails; it then stops the manager, kube-apiserver and etcd in that order.
func Run(ctx context.Context, o Options) (err error) {
	var seeds []*unstructured.Unstructured
	for _, dir := range o.ApplyDirs {
		objs, err := manifest.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("reading manifests to apply from %s: %w", dir, err)
		}
		seeds = append(seeds, objs...)
	}

	if o.CAPI {
		if err := CheckClusterAPI(o.ControlPlane.BinDir); err != nil {
			return err
		}
	}

	started := time.Now()
	progress := func(what string) { fmt.Fprintf(o.Out, "anvil dev: %s (%.0fs)\n", what, time.Since(started).Seconds()) }
	progress("starting etcd and kube-apiserver")
	cp, err := controlplane.Start(ctx, o.ControlPlane)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	progress("control plane up; publishing images to the registry")

	regAuth, err := registryAuth(cp.StateDir())
	if err != nil {
		return err
	}
	if o.KubeImagesDir != "" {
		regAuth.Public = append(regAuth.Public, KubeFolder)
	}
	reg, err := registry.Start(ctx, o.RegistryPort, filepath.Join(cp.StateDir(), "registry"), regAuth)
	if err != nil {
		return fmt.Errorf("%w (choose another with --registry-port)", err)
	}
	defer func() { err = errors.Join(err, reg.Stop()) }()
	dockerConfig, err := writeDockerConfig(cp.StateDir(), reg.Host, regAuth.Push)
	if err != nil {
		return err
	}
	poolsCredentials, poolLogins, err := writePoolsCredentials(cp.StateDir(), reg.Host, *regAuth.Read)
	if err != nil {
		return err
	}
	o.Manager.RegistryCredentials = poolsCredentials
	// This process's pushes (the test OS, the builder image, the manager's build indexes
	// and tags) go through the default keychain: it reads DOCKER_CONFIG.
	if err := os.Setenv("DOCKER_CONFIG", dockerConfig); err != nil {
		return err
	}
	testOS := "not published (no --test-os)"
	if o.TestOSDir != "" {
		if testOS, err = pushTestOS(ctx, o.TestOSDir, reg.Host); err != nil {
			return err
		}
	}
	builder := "off (no --test-os and --agents)"
	if o.TestOSDir != "" && o.AgentsDir != "" {
		if builder, err = pushBuilder(ctx, o.TestOSDir, o.AgentsDir, reg.Host); err != nil {
			return err
		}
		o.Manager.ImageBuilds = ImageBuilds(reg.Host, o.PackageProxy)
		if o.PackageProxy != "" {
			builder += "; package proxy " + o.PackageProxy + " (" + BuilderGuestPackageProxy + " on the builders' network)"
		}
		o.Manager.ImageBuilds.BuilderPush = builderPush(regAuth)
	}

	kube := "not published (no --kube-images, --node-image)"
	if o.KubeImagesDir != "" || o.NodeImageDir != "" {
		if kube, err = publishKube(ctx, o.KubeImagesDir, o.NodeImageDir, reg.Host); err != nil {
			return err
		}
	}

	cfg := cp.RESTConfig()
	scheme, err := api.NewScheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	progress("installing CRDs, policies and roles")
	if err := crd.Install(ctx, c); err != nil {
		return err
	}
	if err := admission.Install(ctx, c); err != nil {
		return err
	}
	// The tenant roles docs/security.md tells tenants they have, for an admin to bind.
	tenantRoles, err := rbac.Load("tenant")
	if err != nil {
		return err
	}
	if _, err := manifest.CreateMissing(ctx, c, tenantRoles); err != nil {
		return err
	}
	if err := ensureNamespace(ctx, c, computev1alpha1.PoolLeaseNamespace); err != nil {
		return err
	}
	debian := "not published (no --debian)"
	if o.DebianDir != "" {
		if debian, err = publishDebian(ctx, c, o.DebianDir, reg.Host, cp.StateDir()); err != nil {
			return err
		}
	}
	if err := announcePools(ctx, c, o); err != nil {
		return err
	}
	created, err := manifest.CreateMissing(ctx, c, seeds)
	if err != nil {
		return err
	}

	// The scheduler reads the indexes of images in anvil dev's registry, on loopback.
	o.Manager.AllowRegistry = append(o.Manager.AllowRegistry, devRegistry(reg.Host)...)
	mgr, err := manager.New(cfg, o.Manager)
	if err != nil {
		return err
	}
	// Machines' consoles through the API (docs/console.md): the console server, in this
	// process, and the APIService that sends kube-apiserver's requests to it.
	serving, err := consoleapi.NewServing("127.0.0.1")
	if err != nil {
		return err
	}
	consoles, err := consoleapi.New(ctx, cfg, mgr.GetAPIReader(), "127.0.0.1:0", serving)
	if err != nil {
		return fmt.Errorf("the console server: %w", err)
	}
	if err := mgr.Add(consoles); err != nil {
		return err
	}
	if err := consoleapi.RegisterLocal(ctx, c, consoles); err != nil {
		return fmt.Errorf("registering the console server: %w", err)
	}
	mgrCtx, stopManager := context.WithCancel(ctx)
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	progress("manager started; starting the pools")
	pools, err := startPools(mgrCtx, o, mgr, cfg, c, cp.StateDir(), reg.Host, PoolImages(reg.Host, poolLogins))
	if err != nil {
		stopManager()
		<-mgrDone
		return err
	}
	capi := "off (no --capi)"
	var capiAPI *ClusterAPI
	var capiDone <-chan struct{}
	if o.CAPI {
		progress("starting Cluster API")
		a, err := StartClusterAPI(mgrCtx, cfg, c, o.ControlPlane.BinDir, filepath.Join(cp.LogDir(), "capi"))
		if err != nil {
			stopManager()
			<-mgrDone
			return err
		}
		defer func() { err = errors.Join(err, a.Stop()) }()
		capiAPI, capi, capiDone = a, a.Summary(), a.Done()
	}
	fleetUI := "off (no --ui-address)"
	if o.UIAddress != "" {
		// After Cluster API: its Clusters are watched only if their API is served.
		u, err := ui.Start(mgrCtx, ui.Options{Config: cfg, Namespaces: []string{metav1.NamespaceDefault}, Address: o.UIAddress})
		if err != nil {
			stopManager()
			<-mgrDone
			return fmt.Errorf("the fleet UI: %w", err)
		}
		go func() { _ = u.Serve(mgrCtx) }()
		fleetUI = u.URL
	}
	etcdPID, apiserverPID := cp.PIDs()
	fmt.Fprintf(o.Out, `anvil dev is up (%.1fs)
  etcd            pid %d, https://127.0.0.1:%d (client certificates only)
  kube-apiserver  pid %d, https://127.0.0.1:%d
  registry        %s (in this process; push and pull with DOCKER_CONFIG=%s; pools read with %s)
  test OS         %s
  Debian 12       %s
  Kubernetes      %s
  OS image builds %s
  manager         in this process
  pools           %s
  Cluster API     %s
  fleet UI        %s
  state           %s (logs in %s)
  samples         %d created, %d already present
Use it with:
  export KUBECONFIG=%s
  kubectl get machineclasses
Stop with Ctrl-C; objects are kept, and VMs and servers keep running, for the next start.
`, time.Since(started).Seconds(), etcdPID, o.ControlPlane.EtcdClientPort, apiserverPID, o.ControlPlane.APIServerPort, reg.Host, dockerConfig, poolsCredentials, testOS, debian, kube, builder,
		orNone(pools.names), capi, fleetUI,
		cp.StateDir(), cp.LogDir(), created, len(seeds)-created, cp.KubeconfigPath())

	select {
	case <-ctx.Done():
		stopManager()
		err = <-mgrDone
		fmt.Fprintln(o.Out, "anvil dev: stopping")
	case err = <-cp.Exited():
		stopManager()
		<-mgrDone
	case err = <-mgrDone:
		stopManager()
		if err == nil {
			err = errors.New("the controller manager stopped unexpectedly")
		}
	case err = <-pools.errs:
		stopManager()
		<-mgrDone
	case <-capiDone:
		err = fmt.Errorf("anvil's Cluster API provider stopped unexpectedly: %v", capiAPI.Err())
		stopManager()
		<-mgrDone
	}
	return err
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
