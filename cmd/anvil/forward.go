package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// newForwardCommand is what QEMU runs for each connection a guest makes to a forwarded
// service (guestfwd cmd:): it joins its standard input and output to one TCP address.
func newForwardCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "forward HOST:PORT",
		Short:  "Join standard input and output to a TCP address (run by QEMU for a guest's forwarded connection)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := net.DialTimeout("tcp", args[0], 10*time.Second)
			if err != nil {
				return fmt.Errorf("forward: %w", err)
			}
			defer conn.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(os.Stdout, conn)
				close(done)
			}()
			_, _ = io.Copy(conn, os.Stdin)
			if tcp, ok := conn.(*net.TCPConn); ok {
				_ = tcp.CloseWrite() // the guest is done sending; the answer may still come
			}
			<-done
			return nil
		},
	}
}
