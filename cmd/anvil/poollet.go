package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/poollet"
	"github.com/anvil-dev/anvil/internal/poollet/identity"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

func newPoolletCommand() *cobra.Command {
	var endpoint string
	var peers []uint32
	var allow []string
	var credentials string
	var shared []string
	var identityMode string
	o := poollet.DefaultOptions("")
	cmd := &cobra.Command{
		Use:   "poollet",
		Short: "Run the agent of one MachinePool against its runtime",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			allowed, err := registrynet.ParseAllowList(allow)
			if err != nil {
				return fmt.Errorf("--allow-registry: %w", err)
			}
			logins, err := registrynet.LoadLogins(credentials)
			if err != nil {
				return fmt.Errorf("--registry-credentials: %w", err)
			}
			// Tags of tenants' images are read here: held to the address rules.
			o.Images = poollet.NewRegistryImages(registrynet.Policy{Allow: allowed, Logins: logins})
			for _, f := range shared {
				if _, err := imageowner.ParseFolder(f); err != nil {
					return fmt.Errorf("--shared-image-folder: %w", err)
				}
			}
			o.ImageFolders = imageowner.FoldersFor(logins, shared)
			rt, conn, err := mri.Dial(endpoint, mri.AllowPeers(peers...), mri.Pool(o.Pool))
			if err != nil {
				return err
			}
			defer conn.Close()
			o.Runtime = rt
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return err
			}
			mode, err := identity.ParseMode(identityMode)
			if err != nil {
				return fmt.Errorf("--identity: %w", err)
			}
			if cfg, err = identity.Config(cmd.Context(), cfg, mode, o.Pool, os.Getenv("NODE_NAME")); err != nil {
				return fmt.Errorf("--identity %s: %w", mode, err)
			}
			mgr, err := poollet.New(cfg, o)
			if err != nil {
				return err
			}
			return mgr.Start(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Pool, "pool", "", "name of the MachinePool (required)")
	f.StringVar(&endpoint, "runtime", "", "the runtime's endpoint, unix:///path.sock (required)")
	addPeerFlag(f, &peers)
	f.StringVar(&o.ProviderID, "provider-id", "", "spec.providerID of a pool this poollet creates")
	f.StringSliceVar(&allow, "allow-registry", nil, registrynet.AllowRegistryUsage)
	f.StringVar(&credentials, "registry-credentials", "", registrynet.RegistryCredentialsUsage)
	f.StringSliceVar(&shared, "shared-image-folder", nil, "a folder (such as infra/os) of the registries --registry-credentials logs in to whose images every namespace's Machines may boot, besides anvil/; elsewhere on them a Machine boots only its namespace's folder; repeat for more")
	f.StringVar(&identityMode, "identity", string(identity.ModeOwn), "own: act with the credentials given; node (a DaemonSet's): make the pool identity anvil-system/poollet-<pool> of the pool named after this node and act as it; pool-token: act as poollet-<pool> with tokens requested with the credentials given. node and pool-token bind the tokens to NODE_NAME")
	f.StringToStringVar(&o.Labels, "labels", nil, "labels of a pool this poollet creates")
	f.DurationVar(&o.Interval, "interval", o.Interval, "how often the runtime's capacity is read and the Lease renewed")
	f.DurationVar(&o.LeaseDuration, "lease-duration", o.LeaseDuration, "how long the pool counts as alive after a renewal")
	f.IntVar(&o.MaxOrphans, "max-orphans", o.MaxOrphans, "runtime machines without a Machine of the pool deleted on its own; with more, all are kept and the pool says so (OrphansHeld)")
	f.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "Machines reconciled at once")
	f.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "requests per second to the apiserver")
	f.IntVar(&o.Burst, "kube-api-burst", o.Burst, "request burst to the apiserver")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "metrics address; 0 turns them off")
	f.StringVar(&o.ConsoleAddress, "console-address", "", "host:port (port 0: any) where the pool's consoles are served to callers allowed get on its machinepools/proxy, published in the MachinePool's status; the host is the address callers dial (docs/console.md); empty: none")
	_ = cmd.MarkFlagRequired("pool")
	_ = cmd.MarkFlagRequired("runtime")
	return cmd
}
