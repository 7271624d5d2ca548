package controlplane

import (
	"net"
	"strconv"
	"testing"
)

// Ports are free where asked when picked, spread out, and never in the kernel's ephemeral
// range, where an outgoing connection could take one before the server binds it.
func TestPortBelowEphemeralIsFreeAndBelowTheRange(t *testing.T) {
	for _, host := range []string{"", "127.0.0.1"} {
		seen := map[int]bool{}
		for range 50 {
			port, err := PortBelowEphemeral(host)
			if err != nil {
				t.Fatal(err)
			}
			if port < firstStablePort || port >= 32768 {
				t.Fatalf("port %d is outside %d-32767", port, firstStablePort)
			}
			l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				t.Fatalf("port %d on %q was handed out but cannot be listened on: %v", port, host, err)
			}
			l.Close()
			seen[port] = true
		}
		if len(seen) < 40 {
			t.Errorf("50 picks on %q gave only %d ports: servers started together would clash", host, len(seen))
		}
	}
}
