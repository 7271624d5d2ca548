package netswitch

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"pgregory.net/rapid"
)

// TestDecideProperties draws segments of one to six ports and frames from any sender with
// any source and destination, and checks what the switch promises.
//
// Safety: nothing reaches a socket that is not a port; nothing is delivered for a sender
// that is not a port or that uses a source MAC not its own; a frame passed on unchanged
// goes to the port that has its destination MAC, or for a group address to the others,
// never back; a frame the gateway makes goes to the sender alone; only a port's own frame
// to the gateway's MAC goes to the gateway's stack, and the stack's frames reach ports only.
// Liveness: a unicast between two ports and a broadcast that is not for the gateway
// are delivered.
func TestDecideProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "ports")
		tb := newTable(segmentConfig{subnet: testSubnet, gateway: testGateway})
		var ports []port
		for i := range n {
			p := port{peer: fmt.Sprintf("/run/p%d", i), mac: mac{0x52, 0x54, 0, 0, 0, byte(i + 1)},
				ip: netip.AddrFrom4([4]byte{10, 200, 0, byte(10 + i)})}
			var err error
			if tb, err = tb.with(p); err != nil {
				t.Fatal(err)
			}
			ports = append(ports, p)
		}
		macs := []mac{macStranger, gatewayMAC, broadcastMAC, {0x01, 0x00, 0x5e, 0, 0, 1}}
		peers := []string{"/run/stranger", ""}
		for _, p := range ports {
			macs = append(macs, p.mac)
			peers = append(peers, p.peer)
		}
		from := rapid.SampledFrom(peers).Draw(t, "from")
		src := rapid.SampledFrom(macs).Draw(t, "src")
		if p, ok := tb.byPeer[from]; ok && rapid.Bool().Draw(t, "honest source") {
			src = p.mac // half the time the sender's own, so the rules after that check are reached
		}
		dst := rapid.SampledFrom(macs).Draw(t, "dst")
		var payload []byte
		etherType := uint16(0x88b5)
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 0:
			payload = rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "bytes")
		case 1:
			etherType = etherTypeARP
			target := rapid.SampledFrom([]netip.Addr{testGateway, ipA, ipB}).Draw(t, "arp target")
			payload = arpRequest(src, ipA, target)[ethHeaderLen:]
		case 2:
			etherType = etherTypeIPv4
			payload = icmpEcho(src, ipA, testGateway, 1, 1, "x")[ethHeaderLen:]
		case 3:
			etherType = etherTypeIPv4
			payload = dhcpClientFrame(src, dhcpClientMessage(src, dhcpDiscover))[ethHeaderLen:]
		}
		frame := frameOf(dst, src, etherType, payload)
		d := tb.decide(from, frame)

		sender, isPort := tb.byPeer[from]
		legit := isPort && sender.mac == src
		if !legit && len(d.deliveries) > 0 {
			t.Fatalf("delivered a frame of %q with source %s", from, src)
		}
		if d.toStack != nil && (!legit || dst != gatewayMAC || len(d.deliveries) > 0 || !bytes.Equal(d.toStack, frame)) {
			t.Fatalf("the stack got a frame of %q from %s to %s (and %d deliveries)", from, src, dst, len(d.deliveries))
		}
		// The gateway's stack sends the same frame: it reaches ports only, by its MAC.
		g := tb.fromGateway(frameOf(dst, gatewayMAC, etherType, payload))
		for _, out := range g.deliveries {
			if owner, ok := tb.byPeer[out.to]; !ok || !dst.isGroup() && owner.mac != dst {
				t.Fatalf("the gateway's frame to %s went to %q", dst, out.to)
			}
		}
		if owner, ok := tb.byMAC[dst]; ok && (len(g.deliveries) != 1 || g.deliveries[0].to != owner) {
			t.Fatalf("the gateway's frame to %s did not reach %s", dst, owner)
		}
		for _, out := range d.deliveries {
			if _, ok := tb.byPeer[out.to]; !ok {
				t.Fatalf("delivered to %q, not a port", out.to)
			}
			if !bytes.Equal(out.frame, frame) { // made by the gateway
				if out.to != from || len(d.deliveries) != 1 || !bytes.Equal(out.frame[6:12], gatewayMAC[:]) {
					t.Fatalf("the gateway's frame went to %q (%d deliveries)", out.to, len(d.deliveries))
				}
				continue
			}
			if out.to == from {
				t.Fatalf("a frame went back to its sender")
			}
			if !dst.isGroup() && tb.byMAC[dst] != out.to {
				t.Fatalf("a frame to %s went to %s", dst, out.to)
			}
		}
		if !legit {
			return
		}
		if owner, ok := tb.byMAC[dst]; ok && owner != from && dst != gatewayMAC {
			if len(d.deliveries) != 1 || d.deliveries[0].to != owner {
				t.Fatalf("a unicast to %s was not delivered to %s: %+v", dst, owner, d)
			}
		}
		if dst == broadcastMAC && etherType == 0x88b5 && len(d.deliveries) != n-1 {
			t.Fatalf("a broadcast reached %d of %d other ports", len(d.deliveries), n-1)
		}
	})
}
