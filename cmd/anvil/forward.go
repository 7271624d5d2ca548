package main

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"
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
			conn, err := net.DialTimeout("tcp", args[0], 10*time.Second)
			if err != nil {
				return errQuiet
			}
			defer conn.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(cmd.OutOrStdout(), conn)
				close(done)
			}()
			_, _ = io.Copy(conn, cmd.InOrStdin())
			if tcp, ok := conn.(*net.TCPConn); ok {
				_ = tcp.CloseWrite() // the guest is done sending; the answer may still come
			}
			<-done
			return nil
		},
	}
}
