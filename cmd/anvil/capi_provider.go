package main

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/anvil-dev/anvil/internal/capiprovider"
)

func newCAPIProviderCommand() *cobra.Command {
	o := capiprovider.DefaultOptions()
	cmd := controllerCommand("capi-provider", "Run anvil's Cluster API infrastructure provider (its own process and identity) against the cluster in KUBECONFIG or in-cluster config",
		func(cfg *rest.Config) (ctrl.Manager, error) { return capiprovider.New(cfg, o) })
	o.AddFlags(cmd.Flags())
	return cmd
}
