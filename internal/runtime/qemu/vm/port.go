package vm

import "net"

// FreeLoopbackPort asks the kernel for a TCP port on 127.0.0.1 that nothing listens on
// now: for a guest's SSH forward (hostfwd), which QEMU binds when it starts.
func FreeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
