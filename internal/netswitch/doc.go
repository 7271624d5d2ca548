// Package netswitch is a small Ethernet switch for QEMU VMs, with a DHCPv4 server, so that
// the NICs of one tenant network (a segment) reach each other and nothing else.
//
// Each segment is one SOCK_DGRAM unix socket; each NIC is a QEMU `-netdev dgram` whose
// local.path is the port's identity (the sender address of every datagram it sends) and
// whose remote.path is the segment's socket. A datagram is one whole Ethernet frame.
//
// The switch answers as the segment's gateway for ARP, DHCP and ICMP echo itself. The rest
// of what a port sends to the gateway's MAC and address (TCP, ARP replies) goes to the
// segment's own TCP/IP stack (gVisor's netstack, gateway.go), through which the host dials
// into the segment (DialTCP) and accepts its VMs' connections (ListenTCP). That stack is
// a station of its segment like a port: its frames are switched by the same table, it
// forwards nothing and has no route off its subnet. The switch routes nothing.
// It must never forward a frame between segments, never forward a frame whose
// sender is not an attached port of that segment or whose source MAC is not that port's,
// never flood unicast to an unknown MAC, and never hand a port any address but its own.
// It does not filter by source IP: Kubernetes nodes route pod addresses over the segment.
//
// A port is known by its socket path and its sender's user: a frame counts only when the
// kernel's credentials (SO_PASSCRED) name this process's user or one New was given
// (QEMU's), since another user can bind any path in a mount namespace of its own. The
// segment sockets are writable by anyone who can reach their folder (dir, given to New).
// Frames to the gateway's stack must carry the port's own address.
//
// The decisions (decide.go, dhcpserver.go) are pure functions of a port table and a frame;
// the sockets (switch.go, segment.go) and the stack's link (link.go) only read, call and
// write.
package netswitch
