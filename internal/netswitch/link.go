package netswitch

import (
	"sync"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// linkMTU is the segment's: QEMU's NICs default to 1500.
const linkMTU = 1500

// link is the gateway stack's NIC, plugged into its segment at the gateway's MAC: frames
// come in from the segment's reader (deliver) and go out through send, which switches
// them as a port's. It writes Ethernet headers itself, so no frame needs a second copy.
type link struct {
	send func(frame []byte)

	mu         sync.RWMutex
	dispatcher stack.NetworkDispatcher // the stack's NIC; nil once detached
}

var _ stack.LinkEndpoint = (*link)(nil)

// deliver hands one received frame to the stack (Ethernet header included; decide has
// checked it). The frame is copied: the reader reuses its buffer.
func (l *link) deliver(frame []byte) {
	l.mu.RLock()
	d := l.dispatcher
	l.mu.RUnlock()
	if d == nil || len(frame) < ethHeaderLen {
		return
	}
	h, _, _ := parseEth(frame)
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	defer pkt.DecRef()
	if _, ok := pkt.LinkHeader().Consume(ethHeaderLen); !ok {
		return
	}
	pkt.PktType = tcpip.PacketHost // decide passes only unicast to the gateway's MAC
	d.DeliverNetworkPacket(tcpip.NetworkProtocolNumber(h.etherType), pkt)
}

// WritePackets sends each packet, its Ethernet header already added by AddHeader. A
// frame the switch cannot pass on is lost, as on a wire; TCP sends it again.
func (l *link) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	for _, pkt := range pkts.AsSlice() {
		v := pkt.ToView()
		l.send(v.AsSlice())
		v.Release()
	}
	return pkts.Len(), nil
}

// AddHeader writes the Ethernet header: from the gateway's MAC, to the MAC the stack's
// ARP resolved (or broadcast, for its ARP requests).
func (*link) AddHeader(pkt *stack.PacketBuffer) {
	eth := header.Ethernet(pkt.LinkHeader().Push(header.EthernetMinimumSize))
	eth.Encode(&header.EthernetFields{
		SrcAddr: tcpip.LinkAddress(gatewayMAC[:]),
		DstAddr: pkt.EgressRoute.RemoteLinkAddress,
		Type:    pkt.NetworkProtocolNumber,
	})
}

func (*link) ParseHeader(pkt *stack.PacketBuffer) bool {
	_, ok := pkt.LinkHeader().Consume(header.EthernetMinimumSize)
	return ok
}

func (l *link) Attach(d stack.NetworkDispatcher) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dispatcher = d
}

func (l *link) IsAttached() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.dispatcher != nil
}

func (*link) MTU() uint32                      { return linkMTU }
func (*link) SetMTU(uint32)                    {}
func (*link) MaxHeaderLength() uint16          { return header.EthernetMinimumSize }
func (*link) LinkAddress() tcpip.LinkAddress   { return tcpip.LinkAddress(gatewayMAC[:]) }
func (*link) SetLinkAddress(tcpip.LinkAddress) {}

// Capabilities: ARP resolves the ports' MACs; no checksum offload, so the stack computes
// and checks every checksum (the guests' kernels check them).
func (*link) Capabilities() stack.LinkEndpointCapabilities {
	return stack.CapabilityResolutionRequired
}

func (*link) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareEther }
func (*link) Wait()                                   {} // no goroutines of its own
func (*link) Close()                                  {}
func (*link) SetOnCloseAction(func())                 {}
