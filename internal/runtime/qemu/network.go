package qemu

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Network is a NIC network with a meaning of its own on this pool: the services of the
// host its guests are given. Every NIC, on a network the pool names or not, is cut off
// from the host and the outside (QEMU's restrict=on): without it QEMU's gateway 10.0.2.2
// is the host's loopback (in anvil dev: etcd, the registry, other VMs' SSH forwards).
// A guest reaches only its network's Forwards and, when Outbound is set, public addresses
// through the outbound proxy at OutboundProxy (see Outbound); off by default.
type Network struct {
	Forwards []NetworkForward
	// Outbound gives the network's guests TCP connections to the outside world's public
	// addresses through an HTTP proxy (CONNECT, or plain http:// requests) at OutboundProxy,
	// which refuses the host's loopback and private, link-local and reserved addresses.
	// It is not NAT: a guest uses the proxy (http_proxy, https_proxy) or reaches nothing.
	Outbound bool
	// Segment, when set, makes the network a switched segment between VMs instead (see
	// Segment): no forwards, no outbound proxy.
	Segment *Segment
}

// NetworkForward gives the guests of a network one service of the hypervisor: a connection
// to Guest (an address of the guest's 10.0.2.0/24 network) reaches Target (host:port).
type NetworkForward struct {
	Guest  string
	Target string
}

// guestNetwork is QEMU's user network; .2 (gateway), .3 (DNS) and .15 (the guest) are taken.
var guestNetwork = &net.IPNet{IP: net.IPv4(10, 0, 2, 0), Mask: net.CIDRMask(24, 32)}

// checkNetworks refuses forwards QEMU would refuse or that would shadow its own addresses.
func checkNetworks(networks map[string]Network) error {
	for name, n := range networks {
		if n.Segment != nil {
			if err := checkSegment(name, n); err != nil {
				return err
			}
			continue
		}
		for _, f := range n.Forwards {
			host, port, err := net.SplitHostPort(f.Guest)
			ip := net.ParseIP(host)
			if err != nil || ip == nil || !guestNetwork.Contains(ip) || ip.Equal(net.IPv4(10, 0, 2, 2)) ||
				ip.Equal(net.IPv4(10, 0, 2, 3)) || ip.Equal(net.ParseIP(vm.GuestAddress)) {
				return fmt.Errorf("qemu runtime: network %s: forward from %q: use an address:port of 10.0.2.0/24 other than .2, .3 and .15", name, f.Guest)
			}
			if n.Outbound && f.Guest == OutboundProxy {
				return fmt.Errorf("qemu runtime: network %s: forward from %q: the network's outbound proxy is there; use another address:port", name, f.Guest)
			}
			if _, err := strconv.ParseUint(port, 10, 16); err != nil {
				return fmt.Errorf("qemu runtime: network %s: forward from %q: bad port", name, f.Guest)
			}
			if _, _, err := net.SplitHostPort(f.Target); err != nil {
				return fmt.Errorf("qemu runtime: network %s: forward to %q: want host:port", name, f.Target)
			}
		}
	}
	return nil
}

// poolNetworks is what the pool reports of its networks (MRI Status), sorted by name, so
// a tenant sees what a NIC on each reaches. nat is Outbound: the proxy at OutboundProxy,
// not NAT.
func poolNetworks(networks map[string]Network) []*mriv1alpha1.PoolNetwork {
	out := make([]*mriv1alpha1.PoolNetwork, 0, len(networks))
	for name, n := range networks {
		pn := &mriv1alpha1.PoolNetwork{Name: name, Nat: n.Outbound}
		if n.Segment != nil {
			pn.Segment = n.Segment.Subnet.String()
		}
		for _, f := range n.Forwards {
			pn.Forwards = append(pn.Forwards, &mriv1alpha1.NetworkForward{Guest: f.Guest, Target: f.Target})
		}
		out = append(out, pn)
	}
	slices.SortFunc(out, func(a, b *mriv1alpha1.PoolNetwork) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// hasForwards reports whether any network gives its guests a forward (the outbound proxy
// is one).
func hasForwards(networks map[string]Network) bool {
	for _, n := range networks {
		if len(n.Forwards) > 0 || n.Outbound {
			return true
		}
	}
	return false
}

// outboundFlag turns the forward command into the outbound proxy (`anvil forward
// --outbound`, Outbound) in place of a target.
const outboundFlag = "--outbound"

// forwardCommand is what QEMU runs per forwarded connection unless the config names one:
// this program's `forward` subcommand (cmd/anvil), which joins stdin and stdout to a TCP
// address.
func forwardCommand() ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return []string{self, "forward"}, nil
}

// ReachableForwardCommand is forwardCommand where QEMU's user (vm.UserForRoot(qemuUser); none when
// this program is not root) can run it: this program, or a copy of it in
// /run/anvil-qemu when that user cannot reach it where it is. For QEMU started outside
// a qemu runtime (the BMC emulator's servers), as the runtime does for its own.
func ReachableForwardCommand(qemuUser string) ([]string, error) {
	c := Config{Networks: map[string]Network{"": {Forwards: []NetworkForward{{}}}}, QEMUUser: qemuUser}
	if err := c.resolveForwardCommand(); err != nil {
		return nil, err
	}
	return c.ForwardCommand, nil
}

// vmNIC is the QEMU description of a NIC device on root port port: on its segment's
// switch (segment, from joinSegmentLocked) or on QEMU's user network.
// Each connection's command is capped per machine (machineID): every forward of every NIC
// of the machine shares its MaxForwardConnections slots.
func (r *Runtime) vmNIC(machineID string, d *device, port int, segment *vm.SegmentSockets) vm.NIC {
	if segment != nil {
		return vm.NIC{ID: d.QEMUID, MAC: d.MAC, Port: port, Segment: segment}
	}
	nic := vm.NIC{ID: d.QEMUID, MAC: d.MAC, Port: port, Restrict: true}
	n := r.cfg.Networks[d.Network] // a network the pool does not name has no forwards
	command := r.forwardCommandFor(machineID)
	nic.Forwards = GuestForwards(n.Forwards, command) // checked in checkNetworks
	if n.Outbound {
		host, port, _ := net.SplitHostPort(OutboundProxy)
		p, _ := strconv.Atoi(port)
		nic.Forwards = append(nic.Forwards, vm.Forward{GuestIP: host, GuestPort: p, Command: shellWords(append(command, outboundFlag))})
	}
	return nic
}

// forwardCommandFor is the forward command with machineID's connection cap.
func (r *Runtime) forwardCommandFor(machineID string) []string {
	max := r.cfg.MaxForwardConnections
	if max == 0 {
		max = DefaultMaxForwardConnections
	}
	if max < 0 {
		return slices.Clone(r.cfg.ForwardCommand)
	}
	return append(slices.Clone(r.cfg.ForwardCommand), "--machine", machineID, "--max-connections", strconv.Itoa(max))
}

// GuestForwards are QEMU's guestfwd options for forwards (whose Guest addresses
// checkNetworks accepts): each connection runs command with the forward's target
// appended. The BMC emulator gives its servers forwards the same way.
func GuestForwards(forwards []NetworkForward, command []string) []vm.Forward {
	var out []vm.Forward
	for _, f := range forwards {
		host, port, _ := net.SplitHostPort(f.Guest)
		p, _ := strconv.Atoi(port)
		out = append(out, vm.Forward{GuestIP: host, GuestPort: p, Command: shellWords(append(slices.Clone(command), f.Target))})
	}
	return out
}

// shellWords quotes words for /bin/sh, which QEMU runs a guestfwd command with.
func shellWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
