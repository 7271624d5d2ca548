package bmcemu

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// consoleSocketFile is the server's QEMU console socket, in its folder: QEMU listens on it
// and writes every byte the guest sends to its serial port to console.log as well.
const consoleSocketFile = "console.sock"

// serialPort is a server's serial console as its BMC offers it over the network: one raw
// TCP stream (Redfish's SerialConsole Telnet service, without telnet's option
// negotiation), one session at a time, joined to the server's QEMU console socket. A
// session opened while another is on is closed at once, as a BMC refuses a second SOL
// session; one opened while the server is off is closed too. The guest's output while no
// session is on is in console.log only, as a real serial line's is lost.
type serialPort struct {
	l      net.Listener
	socket string
	log    logr.Logger
	busy   atomic.Bool

	mu       sync.Mutex
	sessions map[net.Conn]struct{}
}

// listenSerial opens a server's serial port on host (any free port).
func listenSerial(host, socket string, log logr.Logger) (*serialPort, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	p := &serialPort{l: l, socket: socket, log: log, sessions: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Port is the TCP port the serial console is served on.
func (p *serialPort) Port() int { return p.l.Addr().(*net.TCPAddr).Port }

func (p *serialPort) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return // closed
		}
		go p.session(c)
	}
}

func (p *serialPort) session(c net.Conn) {
	defer c.Close()
	if !p.busy.CompareAndSwap(false, true) {
		return // one session at a time
	}
	defer p.busy.Store(false)
	q, err := net.DialTimeout("unix", p.socket, 5*time.Second)
	if err != nil {
		return // the server is off (or its QEMU has no console socket)
	}
	defer q.Close()
	p.track(c, true)
	defer p.track(c, false)
	p.log.V(1).Info("serial console session opened", "from", c.RemoteAddr().String())
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(q, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, q); done <- struct{}{} }()
	<-done // either side ending ends the session (the deferred closes end the other copy)
}

func (p *serialPort) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.sessions[c] = struct{}{}
	} else {
		delete(p.sessions, c)
	}
}

// Close stops serving and ends the session that is on.
func (p *serialPort) Close() error {
	err := p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.sessions {
		c.Close()
	}
	return err
}
