package main

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/anvil-dev/anvil/internal/manager"
)

func newManagerCommand() *cobra.Command {
	o := manager.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run anvil's controller manager against the cluster in KUBECONFIG or in-cluster config",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return err
			}
			mgr, err := manager.New(cfg, o)
			if err != nil {
				return err
			}
			return mgr.Start(cmd.Context())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
