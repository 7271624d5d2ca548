package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/anvil-dev/anvil/internal/consoleapi"
)

// newConsoleCommand is anvil console: a Machine's serial console, or its log, through the
// Kubernetes API with the user's own kubeconfig (docs/console.md). Installed as
// kubectl-anvil (a link to anvil), it is also kubectl anvil console.
func newConsoleCommand() *cobra.Command {
	var log, follow, readOnly bool
	var tail int64
	var since time.Duration
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	cmd := &cobra.Command{
		Use:   "console MACHINE",
		Short: "Attach to a Machine's serial console, or print its console log (--log)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides)
			cfg, err := cc.ClientConfig()
			if err != nil {
				return err
			}
			ns, _, err := cc.Namespace()
			if err != nil {
				return err
			}
			if since < 0 {
				return fmt.Errorf("--since %s: a while is not below zero", since)
			}
			if log {
				// Whole seconds, rounded up: --since 1500ms shows the last two seconds.
				seconds := int64((since + time.Second - 1) / time.Second)
				return consoleapi.ReadLog(cmd.Context(), cfg, ns, args[0],
					consoleapi.LogOptions{Follow: follow, TailLines: tail, SinceSeconds: seconds}, cmd.OutOrStdout())
			}
			if follow || tail != 0 || since != 0 {
				return fmt.Errorf("--follow, --tail and --since go with --log")
			}
			in := consoleapi.UntilEscape(os.Stdin)
			if readOnly {
				in = nil
			} else if fd := int(os.Stdin.Fd()); term.IsTerminal(fd) {
				// Keys go to the machine as typed (Ctrl-C too), not to this terminal.
				state, err := term.MakeRaw(fd)
				if err != nil {
					return err
				}
				defer term.Restore(fd, state) //nolint:errcheck
			}
			fmt.Fprintln(cmd.ErrOrStderr(), consoleapi.EscapeHint)
			return consoleapi.Attach(cmd.Context(), cfg, ns, args[0], in, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&log, "log", false, "print the console log instead of attaching")
	f.BoolVarP(&follow, "follow", "f", false, "with --log: keep printing what the machine writes")
	f.Int64Var(&tail, "tail", 0, "with --log: start this many lines before the end")
	f.DurationVar(&since, "since", 0, "with --log: start at what the machine wrote in this last while (5s, 2m, 3h; to the second)")
	f.BoolVar(&readOnly, "read-only", false, "attach to watch only: any number may watch, one types at a time")
	f.StringVar(&loading.ExplicitPath, "kubeconfig", "", "the kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVarP(&overrides.Context.Namespace, "namespace", "n", "", "the Machine's namespace (default: the context's)")
	f.StringVar(&overrides.CurrentContext, "context", "", "the kubeconfig context to use")
	return cmd
}
