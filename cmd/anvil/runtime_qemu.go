package main

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/anvil-dev/anvil/internal/imageref"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/nocloud"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

func newQEMURuntimeCommand() *cobra.Command {
	var (
		serve                   serveFlags
		listen, cacheDir, accel string
		archs                   []string
		cfg                     = qemu.Config{Name: "qemu", CPUOvercommit: 4, MemoryOvercommit: 1, PowerOffGrace: 10 * time.Second}
		images                  *imageCacheFlags
	)
	cmd := &cobra.Command{
		Use:   "qemu",
		Short: "Virtual machines under QEMU, one process each, booted from OCI OS images; they keep running across restarts of the runtime",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.Architectures, err = qemu.ParseArchitectures(archs); err != nil {
				return fmt.Errorf("--arch: %w", err)
			}
			cfg.Accel = vm.Accel(accel)
			if cacheDir == "" {
				cacheDir = filepath.Join(cfg.StateDir, "cache")
			}
			opts, err := images.options()
			if err != nil {
				return err
			}
			cache, err := osimage.NewCache(cacheDir, opts)
			if err != nil {
				return err
			}
			cfg.Images, cfg.Index, cfg.Seeds = cache, &imageref.Registry{Transport: opts.Network.Transport()}, nocloud.WriteISO
			cfg.Logger = ctrl.Log.WithName("runtime").WithValues("pool", cfg.Name)
			rt, err := qemu.New(cfg)
			if err != nil {
				return err
			}
			defer rt.Close()
			cache.SetInUse(rt.ImageFilesInUse)
			fmt.Fprintf(cmd.OutOrStdout(), "qemu runtime %s serving on %s (state %s, cache %s)\n", cfg.Name, listen, cfg.StateDir, cacheDir)
			return mri.Serve(cmd.Context(), listen, rt, serve.options(cfg.Name)...)
		},
	}
	fl := cmd.Flags()
	addListenFlag(fl, &listen, mri.DefaultEndpoint("qemu"), "")
	serve.add(fl)
	addPoolFlag(fl, &cfg.Name, "name of the MachinePool it serves; starts every machine id")
	fl.StringVar(&cfg.StateDir, "state-dir", "", "one folder per machine; keep it across restarts (required)")
	fl.StringVar(&cacheDir, "cache-dir", "", "pulled image layers, shared by all machines (default <state-dir>/cache)")
	fl.StringSliceVar(&archs, "arch", []string{"amd64", "arm64"}, "architectures to offer, of those whose QEMU is installed: amd64 (x86_64), arm64 (aarch64)")
	fl.StringVar(&accel, "accel", string(vm.AccelTCG), "tcg (emulation, works everywhere), kvm (the host's architecture natively, others emulated), or auto: kvm when a probe guest of the host's architecture is seen to run under KVM here, tcg otherwise (the reason is in the pool's status.execution)")
	fl.Float64Var(&cfg.CPUOvercommit, "cpu-overcommit", cfg.CPUOvercommit, "allocatable cpu = host cpus times this")
	fl.Float64Var(&cfg.MemoryOvercommit, "memory-overcommit", cfg.MemoryOvercommit, "allocatable memory = host memory times this")
	fl.Var(&networkForwards{&cfg.Networks}, "network-forward", "NETWORK=GUEST-ADDR:PORT=TARGET-HOST:PORT (repeatable): NICs on NETWORK reach only the named services, GUEST-ADDR in 10.0.2.0/24")
	fl.StringVar(&cfg.QEMUUser, "qemu-user", vm.DefaultUser, "when the runtime runs as root, the unprivileged user QEMU drops to (-runas); it must exist (hack/install-deps.sh creates "+vm.DefaultUser+")")
	fl.Var(&networkOutbound{&cfg.Networks}, "network-nat", "NETWORK (repeatable): NICs on NETWORK reach the outside world's public addresses through an HTTP proxy at "+qemu.OutboundProxy+" (not NAT; never the host's loopback, private or link-local addresses). Off by default")
	fl.Var(&networkSegment{&cfg.Networks}, "network-segment", "NETWORK=SUBNET (repeatable): NICs on NETWORK are switched between this runtime's VMs of one namespace (a segment each namespace), each given an address of SUBNET (IPv4) by DHCP, the first one the gateway; nothing is added to the host")
	fl.IntVar(&cfg.MaxForwardConnections, "max-forward-connections", qemu.DefaultMaxForwardConnections, "how many connections through its forwards (and outbound proxy) one machine may hold at once, each an anvil forward process; more are closed unanswered")
	fl.DurationVar(&cfg.PowerOffGrace, "power-off-grace", cfg.PowerOffGrace, "how long a guest has to power off on the power button before QEMU is stopped")
	images = addImageCacheFlags(fl)
	_ = cmd.MarkFlagRequired("state-dir")
	return cmd
}

// networkForwards reads --network-forward NETWORK=GUEST=TARGET flags into Config.Networks.
type networkForwards struct{ networks *map[string]qemu.Network }

func (f *networkForwards) String() string { return "" }
func (f *networkForwards) Type() string   { return "network=guest=target" }
func (f *networkForwards) Set(v string) error {
	parts := strings.Split(v, "=")
	if len(parts) != 3 || parts[0] == "" {
		return fmt.Errorf("want NETWORK=GUEST-ADDR:PORT=TARGET-HOST:PORT, got %q", v)
	}
	if *f.networks == nil {
		*f.networks = map[string]qemu.Network{}
	}
	n := (*f.networks)[parts[0]]
	n.Forwards = append(n.Forwards, qemu.NetworkForward{Guest: parts[1], Target: parts[2]})
	(*f.networks)[parts[0]] = n
	return nil
}

// networkOutbound reads --network-nat NETWORK into Config.Networks: the network's guests
// get the outbound proxy (qemu.Outbound). QEMU's own NAT (slirp without restrict) is not
// used: it maps its gateway 10.0.2.2 to the host's loopback, the hole restrict=on closes,
// and reaches the host's private networks.
type networkOutbound struct{ networks *map[string]qemu.Network }

func (f *networkOutbound) String() string { return "" }
func (f *networkOutbound) Type() string   { return "network" }
func (f *networkOutbound) Set(v string) error {
	if v == "" || strings.Contains(v, "=") {
		return fmt.Errorf("want a network name, got %q", v)
	}
	if *f.networks == nil {
		*f.networks = map[string]qemu.Network{}
	}
	n := (*f.networks)[v]
	n.Outbound = true
	(*f.networks)[v] = n
	return nil
}

// networkSegment reads --network-segment NETWORK=SUBNET into Config.Networks: NICs on
// NETWORK are switched between the runtime's VMs of one namespace (qemu.Segment), each
// given an address of SUBNET by the switch's DHCP.
type networkSegment struct{ networks *map[string]qemu.Network }

func (f *networkSegment) String() string { return "" }
func (f *networkSegment) Type() string   { return "network=subnet" }
func (f *networkSegment) Set(v string) error {
	name, subnet, ok := strings.Cut(v, "=")
	prefix, err := netip.ParsePrefix(subnet)
	if !ok || name == "" || err != nil {
		return fmt.Errorf("want NETWORK=SUBNET (such as cluster=10.200.0.0/24), got %q", v)
	}
	if *f.networks == nil {
		*f.networks = map[string]qemu.Network{}
	}
	n := (*f.networks)[name]
	n.Segment = &qemu.Segment{Subnet: prefix}
	(*f.networks)[name] = n
	return nil
}
