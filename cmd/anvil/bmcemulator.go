package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/dev"
)

// newBMCEmulatorCommand runs anvil dev's emulated servers (dev.EmulatedSpecs) behind the
// BMC emulator in a process of its own, until signalled: for tests that kill the BMC
// without killing what else runs beside it (the chaos run). Its servers outlive it, as
// they outlive anvil dev; started again on the same --state-dir it adopts them. It enrols
// no Hosts: dev.EnrolEmulatedServers does, from whoever holds the cluster's credentials.
func newBMCEmulatorCommand() *cobra.Command {
	var cfg bmcemu.Config
	var amd, arm int
	var passwordFile string
	cmd := &cobra.Command{
		Use:    "bmc-emulator",
		Short:  "Serve anvil dev's emulated servers' Redfish BMC on its own until signalled (for tests)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The password is read from a file: a command line is readable by every user.
			raw, err := os.ReadFile(passwordFile)
			if err != nil {
				return fmt.Errorf("the BMC's password: %w", err)
			}
			cfg.Password = strings.TrimSpace(string(raw))
			cfg.Servers = dev.EmulatedSpecs(amd, arm)
			cfg.Logger = ctrl.Log.WithName("bmc")
			e, err := bmcemu.Start(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "BMC emulator serving %d amd64 and %d arm64 servers on %s (state in %s)\n", amd, arm, e.Config().Listen, e.Config().StateDir)
			<-cmd.Context().Done()
			return e.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.StateDir, "state-dir", "", "the servers' folders (disks, consoles, what each BMC keeps); required")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:0", "the BMC's address; keep it across restarts, as Hosts name it")
	f.IntVar(&amd, "servers", 1, "amd64 servers (SeaBIOS): emulated-1...")
	f.IntVar(&arm, "arm64-servers", 0, "arm64 servers (UEFI): emulated-arm64-1...")
	f.StringVar(&cfg.Username, "username", "admin", "the only user name the BMC accepts")
	f.StringVar(&passwordFile, "password-file", "", "file holding the only password the BMC accepts; required")
	_ = cmd.MarkFlagRequired("state-dir")
	_ = cmd.MarkFlagRequired("password-file")
	return cmd
}
