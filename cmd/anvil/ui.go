package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/anvil-dev/anvil/internal/ui"
)

// newUICommand is anvil ui: the fleet in a browser, as the user's kubeconfig may see it
// (docs/ui.md).
func newUICommand() *cobra.Command {
	var namespaces []string
	var address string
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the fleet's pools, machines, servers, builds and clusters in a browser, live, on loopback",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides)
			cfg, err := cc.ClientConfig()
			if err != nil {
				return err
			}
			if len(namespaces) == 0 {
				ns, _, err := cc.Namespace()
				if err != nil {
					return err
				}
				namespaces = []string{ns}
			}
			u, err := ui.Start(cmd.Context(), ui.Options{Config: cfg, Namespaces: namespaces, Address: address})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "anvil ui: open", u.URL)
			return u.Serve(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&address, "address", "127.0.0.1:8090", "loopback host:port to serve on (port 0: any)")
	f.StringSliceVarP(&namespaces, "namespace", "n", nil, "namespaces to show where you may not list all (default: the context's)")
	f.StringVar(&loading.ExplicitPath, "kubeconfig", "", "the kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&overrides.CurrentContext, "context", "", "the kubeconfig context to use")
	return cmd
}
