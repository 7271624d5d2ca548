package ironic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// bootFiles serves Ironic's [deploy] http_root over HTTP: the boot ISOs and config drives
// that redfish-virtual-media boot builds there and names to a server's BMC, which downloads
// them (InsertMedia). Ironic writes the files; nothing else does. Loopback only, as the
// API: a real datacentre's BMCs need it on their management network.
type bootFiles struct {
	srv  *http.Server
	done chan error
}

func serveBootFiles(host string, port int, root string) (*bootFiles, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("ironic: the boot file server: %w", err)
	}
	files := http.FileServer(http.Dir(root))
	b := &bootFiles{done: make(chan error, 1), srv: &http.Server{ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				http.Error(w, "read only", http.StatusMethodNotAllowed)
				return
			}
			files.ServeHTTP(w, r)
		})}}
	go func() {
		err := b.srv.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		b.done <- err
	}()
	return b, nil
}

func (b *bootFiles) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		_ = b.srv.Close()
	}
	<-b.done
}
