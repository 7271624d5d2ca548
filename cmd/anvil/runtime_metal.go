package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/anvil-dev/anvil/internal/metal/pool"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/mri"
)

func newMetalRuntimeCommand() *cobra.Command {
	var listen, cacheDir, wipe string
	var noConsoles bool
	var images *imageCacheFlags
	var serve serveFlags
	cfg := pool.Config{Name: "metal"}
	cmd := &cobra.Command{
		Use: "metal",
		Short: "Bare-metal servers of one site: runs Ironic (supervised, loopback only), the Host controller " +
			"for the Hosts of --namespace and the MRI for their pool",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rc, err := ctrl.GetConfig()
			if err != nil {
				return err
			}
			if cfg.Site.StateDir, err = filepath.Abs(cfg.Site.StateDir); err != nil {
				return err
			}
			cfg.Site.Wipe.Method = site.WipeMethod(wipe)
			cfg.Site.RestConfig = rc
			cfg.Site.Logger = ctrl.Log.WithName("site")
			cfg.Logger = ctrl.Log.WithName("runtime")
			if cfg.ImageCache, err = images.options(); err != nil {
				return err
			}
			cfg.ImageCacheDir = cacheDir
			if cfg.ImageCacheDir == "" {
				cfg.ImageCacheDir = filepath.Join(cfg.Site.StateDir, "cache")
			}
			if !noConsoles {
				cfg.ConsoleDir = filepath.Join(cfg.Site.StateDir, "consoles")
			}
			p, err := pool.Start(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer func() { _ = p.Stop() }()
			fmt.Fprintf(cmd.OutOrStdout(), "metal runtime %s serving on %s (Hosts of namespace %s, Ironic %s, images %s)\n",
				cfg.Name, listen, cfg.Site.Namespace, p.Site.Ironic.Endpoint(), p.Runtime.ImageURL())
			return mri.Serve(cmd.Context(), listen, p.Runtime, serve.options(cfg.Name)...)
		},
	}
	f := cmd.Flags()
	addListenFlag(f, &listen, mri.DefaultEndpoint("metal"), "")
	serve.add(f)
	addPoolFlag(f, &cfg.Name, "name of the MachinePool it serves; starts every machine id")
	f.StringVar(&cfg.Site.Namespace, "namespace", "", "infrastructure namespace holding the site's Hosts, their Secrets and HostPolicies (required)")
	f.StringVar(&cfg.Site.StateDir, "state-dir", "/var/lib/anvil/metal", "folder for Ironic's configuration, database and log, and the servers' console logs")
	f.BoolVar(&noConsoles, "no-consoles", false, "serve no serial consoles (docs/console.md): the console calls answer UNIMPLEMENTED")
	f.StringVar(&cacheDir, "cache-dir", "", "OS image cache (default <state-dir>/cache)")
	images = addImageCacheFlags(f)
	f.IntVar(&cfg.Site.IronicPort, "ironic-port", 6385, "Ironic's API port on 127.0.0.1")
	f.StringVar(&cfg.ImageListen, "image-listen", "127.0.0.1:6180", "address of the server that serves OS disks to servers; keep it fixed across restarts")
	f.StringVar(&cfg.Site.ESPImage, "esp-image", "", "EFI system partition image for the UEFI boot ISOs Ironic builds (make esp: bin/esp.img); without it only Legacy Hosts boot kernel + initramfs images")
	f.StringVar(&wipe, "wipe", string(site.WipeEraser), "how released servers' disks are erased before anyone else gets them: eraser (anvil's, --eraser), ironic (Ironic's automated cleaning; needs its agent ramdisk) or none")
	f.StringVar(&cfg.Site.Wipe.EraserDir, "eraser", "", "the disk eraser, ARCH/{kernel,initramfs,cmdline} (make eraser: bin/eraser); required with --wipe eraser")
	f.BoolVar(&cfg.Site.Wipe.Full, "wipe-full", false, "erase every block of every disk, not the first and last MiB (eraser), or run Ironic's erase_devices as well as erase_devices_metadata (ironic)")
	f.DurationVar(&cfg.Site.Wipe.Timeout, "wipe-timeout", 30*time.Minute, "how long the eraser may run before the wipe counts as failed and is tried again")
	f.IntVar(&cfg.Site.MaxConcurrentDeploy, "max-concurrent-deploy", 0, "deployments at once, in Ironic and in anvil's queue (0: Ironic's default, 250)")
	f.IntVar(&cfg.Site.MaxConcurrentClean, "max-concurrent-clean", 0, "cleanings at once (0: Ironic's default, 50)")
	f.IntVar(&cfg.Site.Workers, "workers", 64, "Hosts reconciled at once (each waits on Ironic while it works)")
	f.Float32Var(&cfg.Site.QPS, "kube-api-qps", 100, "requests per second the site and its runtime may each send to the apiserver")
	f.IntVar(&cfg.Site.Burst, "kube-api-burst", 200, "requests they may send in a burst above --kube-api-qps")
	_ = cmd.MarkFlagRequired("namespace")
	return cmd
}
