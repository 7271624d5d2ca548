package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
)

func newDevCommand(logOpts *zap.Options) *cobra.Command {
	o := dev.Options{
		ControlPlane: controlplane.Config{
			StateDir:       ".anvil",
			BinDir:         defaultBinDir(),
			APIServerPort:  6443,
			EtcdClientPort: 2379,
			EtcdPeerPort:   2380,
		},
		Manager:        manager.DefaultOptions(),
		RegistryPort:   5001,
		QemuPools:      true,
		MetalPool:      true,
		MetalImagePort: 5002,
		BMCPort:        5003,
	}
	// In dev the manager's endpoints are off by default: nothing to scrape, fewer ports to clash.
	o.Manager.MetricsAddr, o.Manager.HealthAddr = "0", "0"
	var fakePool string
	var qemuArchs []string
	var logToTerminal bool
	ff := fakeFlags{cpu: "64", memory: "256Gi", archs: []string{"amd64", "arm64"}}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local anvil: etcd, kube-apiserver, anvil's CRDs and controllers, state kept in --state-dir",
		Long: `Run a local anvil for development and demos. It starts etcd and kube-apiserver on
loopback ports, installs anvil's CRDs, runs the controller manager in this process and
writes an admin kubeconfig to <state-dir>/kubeconfig. Ctrl-C or SIGTERM stops anvil; VMs
and emulated servers keep running, and the next start finds every object again and adopts
them.`,
		Args: cobra.NoArgs,
		// In place of the root's: the logger is set once per process, and anvil dev's goes to
		// a file unless asked otherwise.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if logToTerminal {
				ctrl.SetLogger(zap.New(zap.UseFlagOptions(logOpts)))
				return nil
			}
			// The terminal is for the banner and progress; the structured logs (a hundred JSON
			// lines a minute while the pools start) go beside etcd's and the apiserver's. The
			// file stays open for the process's life.
			logFile, err := openDevLog(o.ControlPlane.StateDir)
			if err != nil {
				return err
			}
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(logOpts), zap.WriteTo(logFile)))
			klog.SetLogger(ctrl.Log.WithName("klog"))
			fmt.Fprintf(cmd.OutOrStdout(), "anvil dev: logs in %s (--log-to-terminal to see them here)\n", logFile.Name())
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Out = cmd.OutOrStdout()
			if fakePool != "" {
				cfg, err := ff.config(fakePool)
				if err != nil {
					return err
				}
				o.FakePools = []dev.FakePool{{Name: fakePool, Config: cfg}}
			}
			if len(qemuArchs) > 0 {
				archs, err := qemu.ParseArchitectures(qemuArchs)
				if err != nil {
					return err
				}
				o.QemuArchitectures = archs
			}
			if o.ESPImage == "" {
				if esp := filepath.Join(o.ControlPlane.BinDir, "esp.img"); isFile(esp) {
					o.ESPImage = esp
				}
			}
			if o.EraserDir == "" {
				if eraser := filepath.Join(o.ControlPlane.BinDir, "eraser"); isFile(filepath.Join(eraser, "VERSIONS")) {
					o.EraserDir = eraser
				}
			}
			return dev.Run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ControlPlane.StateDir, "state-dir", o.ControlPlane.StateDir, "folder for etcd's data, keys, logs and the kubeconfig")
	f.StringVar(&o.ControlPlane.BinDir, "bin-dir", o.ControlPlane.BinDir, "folder holding etcd and kube-apiserver (built by make tools)")
	f.IntVar(&o.ControlPlane.APIServerPort, "apiserver-port", o.ControlPlane.APIServerPort, "loopback port of kube-apiserver")
	f.StringVar(&o.ControlPlane.AuditLog, "audit-log", "", "file where kube-apiserver logs every write (who, which client, which object; no bodies) as JSON lines, for counting each controller's writes")
	f.IntVar(&o.ControlPlane.EtcdClientPort, "etcd-port", o.ControlPlane.EtcdClientPort, "loopback port of etcd's client API")
	f.IntVar(&o.ControlPlane.EtcdPeerPort, "etcd-peer-port", o.ControlPlane.EtcdPeerPort, "loopback port of etcd's peer API")
	f.IntVar(&o.RegistryPort, "registry-port", o.RegistryPort, "loopback port of the embedded OCI registry")
	f.StringVar(&o.TestOSDir, "test-os", o.TestOSDir, "folder of the test OS (make testos) to publish to the registry as "+dev.TestOSRepository)
	f.StringVar(&o.DebianDir, "debian", o.DebianDir, "folder of the Debian image (make debian: disk/ARCH, ram/ARCH) to publish as "+dev.DebianRepository+" and "+dev.DebianRAMRepository+", with a login key for the Debian samples (config/samples/debian)")
	f.StringVar(&o.KubeImagesDir, "kube-images", o.KubeImagesDir, "folder of the Kubernetes control-plane images (make kube-images) to publish under "+dev.KubeFolder+" (readable without a credential), reached by Machines on the QEMU pools' "+dev.KubeNetwork+" network at "+dev.KubeGuestRegistry+" (docs/kubeadm.md)")
	f.StringVar(&o.NodeImageDir, "node-image", o.NodeImageDir, "folder of the Kubernetes node image (make node-image: disk/ARCH) to publish as "+dev.NodeImageRepository+":VERSION")
	f.StringVar(&o.AgentsDir, "agents", o.AgentsDir, "folder of the build agents (make agents; ARCH/anvil-build-agent): with --test-os, publishes the builder image "+dev.BuilderRepository+" and turns OS image builds on")
	f.StringVar(&o.PackageProxy, "package-proxy", "", "HTTP proxy or mirror for packages (host:port on this machine): builders reach it on their network at "+dev.BuilderGuestPackageProxy+" and RUN steps get it as http_proxy (apt needs one)")
	f.StringSliceVar(&o.ApplyDirs, "apply", nil, "folders of YAML manifests whose objects are created when missing (repeatable)")
	f.BoolVar(&o.QemuPools, "qemu-pools", o.QemuPools, "run a QEMU pool per architecture whose QEMU is installed")
	f.StringSliceVar(&qemuArchs, "qemu-architectures", nil, "with --qemu-pools, only these architectures (default: every one whose QEMU is installed)")
	f.BoolVar(&o.MetalPool, "metal-pool", o.MetalPool, "run Ironic with fake-hardware Hosts and a bare-metal pool, when Ironic is installed")
	f.IntVar(&o.MetalImagePort, "metal-image-port", o.MetalImagePort, "loopback port the bare-metal pool serves OS disks to servers on")
	f.IntVar(&o.EmulatedServers, "emulated-servers", o.EmulatedServers, "amd64 QEMU servers behind a Redfish BMC emulator in the bare-metal pool, deployed by Ironic (0: none)")
	f.IntVar(&o.EmulatedARM64Servers, "emulated-arm64-servers", o.EmulatedARM64Servers, "arm64 QEMU servers (UEFI) behind the same BMC emulator; they need --esp-image (0: none)")
	f.StringVar(&o.ESPImage, "esp-image", "", "EFI system partition image for the UEFI boot ISOs Ironic builds (default: esp.img in --bin-dir when there, built by make esp)")
	f.StringVar(&o.EraserDir, "eraser", "", "the disk eraser the bare-metal pool deploys on released servers (default: eraser in --bin-dir when there, built by make eraser)")
	f.IntVar(&o.BMCPort, "bmc-port", o.BMCPort, "loopback port of the emulated servers' Redfish BMC")
	f.BoolVar(&o.CAPI, "capi", false, "run Cluster API beside anvil: its core manager, kubeadm bootstrap and control-plane providers (from --bin-dir, built by make tools) and anvil's provider, installed as clusterctl init would (docs/capi.md, \"Quick start\")")
	f.StringVar(&o.UIAddress, "ui-address", "127.0.0.1:0", "loopback host:port where anvil ui serves the fleet in a browser as the admin sees it (port 0: any; the address with its token is printed); empty: no UI (docs/ui.md)")
	f.StringVar(&fakePool, "fake-pool", "dev-fake", "name of an in-process pool of the fake runtime; empty for none")
	f.BoolVar(&logToTerminal, "log-to-terminal", false, "write anvil's structured logs to the terminal instead of <state-dir>/logs/anvil.log")
	ff.addFlags(cmd)
	o.Manager.AddFlags(f)
	return cmd
}

// defaultBinDir is bin/ beside the anvil executable (the checkout's bin/ after make build),
// else ./bin.
func defaultBinDir() string {
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err == nil {
			return dir
		}
	}
	return "bin"
}

// openDevLog opens <stateDir>/logs/anvil.log for appending, making the folder as the
// control plane does (its logs go there too).
func openDevLog(stateDir string) (*os.File, error) {
	dir := filepath.Join(stateDir, "logs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(dir, "anvil.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
}

// isFile reports whether path names a regular file.
func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
