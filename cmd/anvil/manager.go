package main

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/anvil-dev/anvil/internal/manager"
)

func newManagerCommand() *cobra.Command {
	o := manager.DefaultOptions()
	cmd := controllerCommand("manager", "Run anvil's controller manager against the cluster in KUBECONFIG or in-cluster config",
		func(cfg *rest.Config) (ctrl.Manager, error) { return manager.New(cfg, o) })
	o.AddFlags(cmd.Flags())
	return cmd
}

// controllerCommand runs the controller-runtime manager build makes against the cluster in
// KUBECONFIG or the in-cluster config, until the command's context ends.
func controllerCommand(use, short string, build func(*rest.Config) (ctrl.Manager, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return err
			}
			mgr, err := build(cfg)
			if err != nil {
				return err
			}
			return mgr.Start(cmd.Context())
		},
	}
}
