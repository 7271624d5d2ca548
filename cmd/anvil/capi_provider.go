package main

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/anvil-dev/anvil/internal/capiprovider"
)

func newCAPIProviderCommand() *cobra.Command {
	o := capiprovider.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "capi-provider",
		Short: "Run anvil's Cluster API infrastructure provider (its own process and identity) against the cluster in KUBECONFIG or in-cluster config",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return err
			}
			mgr, err := capiprovider.New(cfg, o)
			if err != nil {
				return err
			}
			return mgr.Start(cmd.Context())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
