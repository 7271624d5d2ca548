package controlplane

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// The ports PortBelowEphemeral picks from: below Linux's ephemeral range (32768 and up by
// default).
const firstStablePort, lastStablePort = 20000, 32767

// PortBelowEphemeral is a TCP port free now on host ("" for every interface), for a server
// started on it a moment later, or stopped and started again on it. A port the kernel hands
// out (host:0) is in its ephemeral range, where any process's outgoing connection may be
// given it meanwhile, and the server then fails with "address already in use" (seen in CI
// on anvil dev's restart, and with a Cluster API manager's webhook); below that range the
// kernel gives it to nobody.
func PortBelowEphemeral(host string) (int, error) {
	for range 100 {
		port := firstStablePort + rand.IntN(lastStablePort-firstStablePort+1)
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d after 100 tries", firstStablePort, lastStablePort)
}
