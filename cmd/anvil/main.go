package main

import (
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		if !errors.Is(err, errQuiet) {
			fmt.Fprintln(os.Stderr, "anvil:", err)
		}
		stop()
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	var logOpts zap.Options
	root := &cobra.Command{
		Use:           "anvil",
		Short:         "Provision bare-metal servers and virtual machines of every architecture from Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&logOpts)))
		},
	}
	logFlags := goflag.NewFlagSet("log", goflag.ContinueOnError)
	logOpts.BindFlags(logFlags)
	root.PersistentFlags().AddGoFlagSet(logFlags)
	root.AddCommand(newDevCommand(&logOpts), newManagerCommand(), newCAPIProviderCommand(), newPoolletCommand(), newRuntimeCommand(), newVersionCommand())
	root.AddCommand(newImageCommand(), newForwardCommand(), newBMCEmulatorCommand(), newConsoleCommand(), newUICommand())
	return root
}
