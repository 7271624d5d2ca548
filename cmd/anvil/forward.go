package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/anvil-dev/anvil/internal/runtime/qemu"
)

// errQuiet ends a command whose failure must not be printed: main exits 1 and says nothing.
var errQuiet = errors.New("failed (not printed)")

// newForwardCommand is what QEMU runs for each connection a guest makes to a forwarded
// service (guestfwd cmd:): it joins its standard input and output to one TCP address.
//
// QEMU gives the command the guest's connection as every one of its standard streams, so
// it never prints: an error message would reach the guest as the first bytes of the
// service's answer (a registry client then read "anvil: forward: ..." as a malformed HTTP
// status line and gave up). When the address cannot be reached the connection is closed
// unanswered, which a client sees as the service being away and retries.
func newForwardCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "forward HOST:PORT",
		Short:  "Join standard input and output to a TCP address (run by QEMU for a guest's forwarded connection)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := qemu.Forward(cmd.InOrStdin(), cmd.OutOrStdout(), args[0]); err != nil {
				return errQuiet
			}
			return nil
		},
	}
}
