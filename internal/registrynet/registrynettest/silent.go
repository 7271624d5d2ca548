// Package registrynettest has hostile registries for tests of registry clients. It is
// imported by tests only.
package registrynettest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Silent is a "registry" on loopback that accepts connections and never answers a byte.
type Silent struct {
	// Host is its host:port.
	Host string
	// Accepted counts the connections it accepted; Open those the client has not closed.
	Accepted, Open atomic.Int32
}

// StartSilent starts one; the test's cleanup closes it and every connection it holds (so
// a test that fails with a client still waiting ends).
func StartSilent(t testing.TB) *Silent {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Silent{Host: l.Addr().String()}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			s.Accepted.Add(1)
			s.Open.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Read (and drop) what the client sends until it hangs up.
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
				c.Close()
				s.Open.Add(-1)
			}()
		}
	}()
	return s
}
