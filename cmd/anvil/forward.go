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
//
// With --outbound (in place of HOST:PORT) it is the outbound proxy of a network with
// outbound access (qemu.Outbound): it reads one HTTP proxy request from the guest and
// connects only to public addresses, answering a refusal in HTTP.
//
// With --machine, it first takes one of --max-connections slots of that machine
// (qemu.AcquireForwardSlot) and, when all are taken, closes the connection at once: QEMU
// starts a process per connection, so the cap bounds the processes one guest can make.
func newForwardCommand() *cobra.Command {
	var outbound bool
	var machine string
	var maxConns int
	cmd := &cobra.Command{
		Use:    "forward HOST:PORT | forward --outbound",
		Short:  "Join standard input and output to a TCP address (run by QEMU for a guest's forwarded connection)",
		Hidden: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if outbound {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if machine != "" {
				release, err := qemu.AcquireForwardSlot(machine, maxConns)
				if err != nil {
					return errQuiet // the guest sees its connection closed, as for an absent service
				}
				defer release()
			}
			var err error
			if outbound {
				err = qemu.Outbound(cmd.InOrStdin(), cmd.OutOrStdout())
			} else {
				err = qemu.Forward(cmd.InOrStdin(), cmd.OutOrStdout(), args[0])
			}
			if err != nil {
				return errQuiet
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&outbound, "outbound", false, "serve one guest connection as the outbound HTTP proxy (public addresses only)")
	cmd.Flags().StringVar(&machine, "machine", "", "the machine whose connection this is: with --max-connections, caps the machine's concurrent forwarded connections")
	cmd.Flags().IntVar(&maxConns, "max-connections", qemu.DefaultMaxForwardConnections, "with --machine: how many forwarded connections the machine may hold at once; more are closed unanswered")
	return cmd
}
