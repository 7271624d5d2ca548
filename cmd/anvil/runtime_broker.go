package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/runtime/broker"
)

func newBrokerRuntimeCommand() *cobra.Command {
	var listen, kubeconfig, namespace, pool, cacheDir string
	var selector map[string]string
	var qps float32
	var burst int
	var images *imageCacheFlags
	var serve serveFlags
	cmd := &cobra.Command{
		Use: "broker",
		Short: "A pool whose machines are Machines of another anvil cluster: serves the MRI for --pool, " +
			"making each machine a Machine in --namespace of the cluster --kubeconfig reaches",
		Long: `Serve the MRI for one pool whose machines live in a downstream anvil cluster (a site).
Each machine becomes a Machine (and its first-boot Secret) in --namespace downstream, named
by the upstream Machine's uid; the downstream scheduler places it on the pools
--pool-selector picks. The pool's capacity is what those pools have free for it. The
kubeconfig should be the identity of config/rbac/broker for that namespace (docs/pools.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := downstreamConfig(kubeconfig, qps, burst)
			if err != nil {
				return err
			}
			imgOpts, err := images.options()
			if err != nil {
				return err
			}
			if cacheDir, err = filepath.Abs(cacheDir); err != nil {
				return err
			}
			imgs, err := osimage.NewCache(cacheDir, imgOpts)
			if err != nil {
				return err
			}
			scheme, err := api.NewScheme()
			if err != nil {
				return err
			}
			copts := broker.CacheOptions(namespace, pool)
			copts.Scheme = scheme
			c, err := cache.New(cfg, copts)
			if err != nil {
				return err
			}
			cl, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				return err
			}
			rt, err := broker.New(broker.Options{Client: cl, Config: cfg, Cache: c, Namespace: namespace, PoolName: pool,
				PoolSelector: selector, Images: imgs, Logger: ctrl.Log.WithName("broker")})
			if err != nil {
				return err
			}
			defer rt.Close()
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			errs := make(chan error, 3)
			go func() { errs <- c.Start(ctx) }()
			go func() { errs <- rt.Run(ctx) }()
			go func() { errs <- mri.Serve(ctx, listen, rt, serve.options(pool)...) }()
			fmt.Fprintf(cmd.OutOrStdout(), "broker runtime %s serving on %s (Machines of namespace %s at %s)\n", pool, listen, namespace, cfg.Host)
			// The first to return ends the others: a cache or server that stops is a broker
			// that cannot answer truthfully.
			err = <-errs
			cancel()
			return err
		},
	}
	f := cmd.Flags()
	addListenFlag(f, &listen, mri.DefaultEndpoint("broker"), "")
	serve.add(f)
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the downstream anvil cluster (required)")
	f.StringVar(&namespace, "namespace", "", "downstream namespace the broker's Machines and Secrets go to (required)")
	f.StringVar(&pool, "pool", "", "name of the upstream MachinePool this broker serves (required); labels every downstream object")
	f.StringToStringVar(&selector, "pool-selector", nil, "labels of the downstream MachinePools the broker's Machines may go to (default: every pool)")
	// One client writes for a whole pool of the site (2-3 requests per machine), as the
	// controller manager does for a cluster: the manager's defaults.
	f.Float32Var(&qps, "kube-api-qps", 200, "requests per second to the downstream apiserver")
	f.IntVar(&burst, "kube-api-burst", 400, "request burst to the downstream apiserver")
	f.StringVar(&cacheDir, "cache-dir", "/var/lib/anvil/broker/cache", "OS image cache (manifests only: the broker checks images at create, it pulls no layers)")
	images = addImageCacheFlags(f)
	_ = cmd.MarkFlagRequired("namespace")
	_ = cmd.MarkFlagRequired("pool")
	return cmd
}

// downstreamConfig is the client config of the downstream cluster from kubeconfig, held to
// qps and burst. A kubeconfig sets no rate limit, and client-go's default (5 per second)
// would hold a whole pool's creates to about two a second.
func downstreamConfig(kubeconfig string, qps float32, burst int) (*rest.Config, error) {
	switch {
	case kubeconfig == "":
		return nil, errors.New("--kubeconfig: the downstream cluster's kubeconfig is required")
	case qps <= 0:
		return nil, fmt.Errorf("--kube-api-qps must be positive, not %v", qps)
	case burst < 1:
		return nil, fmt.Errorf("--kube-api-burst must be at least 1, not %d", burst)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = qps, burst
	return cfg, nil
}
