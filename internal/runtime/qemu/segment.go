package qemu

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/netswitch"
	"github.com/anvil-dev/anvil/internal/nocloud"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Segment makes a network an Ethernet segment between VMs (Network.Segment): its NICs are
// plugged into Config.Switch instead of QEMU's user network, one segment per namespace,
// so the VMs of one namespace on the network reach each other (and only each other),
// whatever pool sharing the switch runs them. The switch hands each NIC one address of
// Subnet by DHCP, with the subnet's first address as the gateway (it answers ARP and ping,
// and routes nothing: a default route there makes the segment the guest's main network)
// and no resolver. The addresses are the guests' own: nothing is added to the host.
type Segment struct {
	Subnet netip.Prefix
}

// Gateway is the segment's first address: the switch's own on the segment.
func (s *Segment) Gateway() netip.Addr { return s.Subnet.Masked().Addr().Next() }

// checkSegment refuses a segment the switch could not serve.
func checkSegment(name string, n Network) error {
	s := n.Segment
	if !s.Subnet.IsValid() || !s.Subnet.Addr().Is4() || s.Subnet.Bits() > 30 {
		return fmt.Errorf("qemu runtime: network %s: segment subnet %v: want an IPv4 prefix of /30 or wider", name, s.Subnet)
	}
	if len(n.Forwards) > 0 || n.Outbound {
		return fmt.Errorf("qemu runtime: network %s: a segment has no forwards or outbound proxy (those are QEMU's user network's)", name)
	}
	return nil
}

// hasSegments reports whether any network is a segment.
func hasSegments(networks map[string]Network) bool {
	for _, n := range networks {
		if n.Segment != nil {
			return true
		}
	}
	return false
}

// SegmentName is the switch's name of namespace's segment of network: a hash, so that
// names of any length make a short, safe socket file name.
func SegmentName(namespace, network string) string {
	h := sha256.Sum256([]byte(namespace + "\x00" + network))
	return hex.EncodeToString(h[:8])
}

// nicSocket is where QEMU binds a switched NIC's own socket.
func nicSocket(state, machineID, qemuID string) string {
	return filepath.Join(MachineDir(state, machineID), qemuID+".sock")
}

// checkSegmentNICs refuses a NIC on a segment network of a machine that does not say its
// namespace: its segment could not be told from another tenant's.
func (r *Runtime) checkSegmentNICs(labels map[string]string, nics ...*mriv1alpha1.NetworkInterface) error {
	for _, n := range nics {
		if r.cfg.Networks[n.GetNetwork()].Segment != nil && labels[mri.LabelMachineNamespace] == "" {
			return mri.Invalidf("network interface %s: network %s is a segment of one namespace's machines; the machine has no %s label",
				n.GetName(), n.GetNetwork(), mri.LabelMachineNamespace)
		}
	}
	return nil
}

// joinSegmentLocked plugs a switched NIC into its namespace's segment (again, after a
// restart: the switch keeps nothing) and returns its sockets; the first join takes the
// NIC's address from the switch and keeps it in the record. nil for a NIC of another
// network. mu must be held.
func (r *Runtime) joinSegmentLocked(machineID string, rec *record, d *device) (*vm.SegmentSockets, error) {
	seg := r.cfg.Networks[d.Network].Segment
	if seg == nil {
		return nil, nil
	}
	mac, err := net.ParseMAC(d.MAC)
	if err != nil {
		return nil, fmt.Errorf("nic %s: %w", d.Name, err)
	}
	port := netswitch.Port{Peer: nicSocket(r.cfg.StateDir, machineID, d.QEMUID), MAC: mac}
	if d.IP != "" {
		if port.IP, err = netip.ParseAddr(d.IP); err != nil {
			return nil, fmt.Errorf("nic %s: recorded address: %w", d.Name, err)
		}
	}
	name := d.Segment
	if name == "" {
		name = SegmentName(rec.Machine.GetMetadata().GetLabels()[mri.LabelMachineNamespace], d.Network)
	}
	remote, ip, err := r.cfg.Switch.Attach(netswitch.Segment{Name: name, Subnet: seg.Subnet, Gateway: seg.Gateway()}, port)
	if err != nil {
		return nil, fmt.Errorf("nic %s: joining its segment: %w", d.Name, err)
	}
	d.IP, d.Segment = ip.String(), name
	return &vm.SegmentSockets{Local: port.Peer, Switch: remote}, nil
}

// leaveSegment unplugs a switched NIC from its segment, freeing its address.
func (r *Runtime) leaveSegment(machineID string, d *device) {
	if d.Kind == kindNIC && r.cfg.Networks[d.Network].Segment != nil {
		r.cfg.Switch.Detach(nicSocket(r.cfg.StateDir, machineID, d.QEMUID))
	}
}

// rejoinSegments plugs the switched NICs that have an address back in when the runtime
// starts, before this runtime gives any new NIC one, so a running VM keeps its address
// and its peers. A NIC whose network is no longer a segment forgets its address. A NIC the
// switch refuses (another runtime sharing it gave its address away meanwhile, or the
// subnet changed) is logged and left off its segment: one machine's trouble never stops
// the runtime; its next start joins again, with a new address if it has to.
func (r *Runtime) rejoinSegments() {
	for id, m := range r.machines {
		for _, d := range m.rec.Devices {
			if d.Kind != kindNIC || d.IP == "" {
				continue
			}
			if r.cfg.Networks[d.Network].Segment == nil {
				d.IP, d.Segment = "", ""
				continue
			}
			if _, err := r.joinSegmentLocked(id, m.rec, d); err != nil {
				r.cfg.Logger.Error(err, "a NIC could not join its segment again; its machine's next start tries again", "machine", id)
				d.IP = ""
			}
		}
	}
}

// networkConfigLocked is the seed's network-config of a machine with a NIC on a segment:
// DHCP on every NIC, each named as its spec names it (nocloud.NetworkConfig), since
// cloud-init's fallback would bring up only one. nil (cloud-init's fallback, the first
// NIC by DHCP) for a machine with none. NICs plugged later are the guest's to configure.
// mu must be held.
func (r *Runtime) networkConfigLocked(rec *record) []byte {
	var nics []nocloud.Interface
	switched := false
	for _, d := range rec.Devices {
		if d.Kind != kindNIC || d.Detached {
			continue
		}
		nics = append(nics, nocloud.Interface{Name: d.Name, MAC: d.MAC})
		switched = switched || r.cfg.Networks[d.Network].Segment != nil
	}
	if !switched {
		return nil
	}
	return nocloud.NetworkConfig(nics)
}

// SwitchDir is where the switch of the runtime with state folder stateDir keeps its
// sockets: stateDir/net, or, when QEMU drops to its own user (the runtime is root), a
// folder under /run/anvil-qemu (which that user can reach, unlike a state folder closed
// to others), named after stateDir.
func SwitchDir(stateDir string) (string, error) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return "", err
	}
	if os.Geteuid() != 0 {
		return filepath.Join(abs, "net"), nil
	}
	if err := os.MkdirAll(forwardCopyDir, 0o755); err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(abs))
	return filepath.Join(forwardCopyDir, "net-"+hex.EncodeToString(h[:8])), nil
}
