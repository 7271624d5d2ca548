package netswitch

import (
	"reflect"
	"testing"
)

// FuzzParseDHCP: the parser never panics on outside input, and what it reads encodes
// back to a message that reads the same.
func FuzzParseDHCP(f *testing.F) {
	f.Add(dhcpClientMessage(macA, dhcpDiscover).bytes())
	f.Add(dhcpClientMessage(macA, dhcpRequest, dhcpOption{optRequestedIP, addr4(ipA)}).bytes())
	f.Add(dhclientDiscover(f)[ethHeaderLen+ipv4HeaderLen+udpHeaderLen:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseDHCP(b)
		if err != nil {
			return
		}
		_ = m.messageType()
		_, _ = m.addrOption(optRequestedIP)
		again, err := parseDHCP(m.bytes())
		if err != nil {
			t.Fatalf("re-reading an encoded message: %v", err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", again, m)
		}
	})
}

// FuzzDecide: any frame from any sender is decided without a panic, and nothing reaches
// a socket that is not a port of the segment, or comes from a sender that is not one.
func FuzzDecide(f *testing.F) {
	f.Add("/run/a", dhclientDiscover(f))
	f.Add("/run/a", arpRequest(macA, ipA, testGateway))
	f.Add("/run/c", icmpEcho(macC, ipC, testGateway, 1, 1, "x"))
	f.Add("/run/b", frameOf(broadcastMAC, macB, 0x88b5, []byte("x")))
	f.Add("/run/x", frameOf(macA, macB, 0x88b5, []byte("x")))
	tb := testTable(f)
	f.Fuzz(func(t *testing.T, from string, frame []byte) {
		d := tb.decide(from, frame)
		p, isPort := tb.byPeer[from]
		if len(d.deliveries) > 0 && (!isPort || len(frame) < ethHeaderLen || mac(frame[6:12]) != p.mac) {
			t.Fatalf("delivered a frame of sender %q with source % x", from, frame[6:min(len(frame), 12)])
		}
		for _, out := range d.deliveries {
			if _, ok := tb.byPeer[out.to]; !ok {
				t.Fatalf("delivered to %q, not a port", out.to)
			}
		}
	})
}
