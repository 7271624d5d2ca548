package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem" // storage drivers register themselves
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"github.com/sirupsen/logrus"
)

// Registry is a running registry.
type Registry struct {
	// Host is host:port, for image references (Host + "/repo:tag").
	Host   string
	server *http.Server
	done   chan error
}

// Start serves a registry on 127.0.0.1:port (0 picks a free port). An empty dir keeps
// blobs in memory. With auth, only its push credential may write; without, anyone may.
func Start(ctx context.Context, port int, dir string, auth *Auth) (*Registry, error) {
	storage := configuration.Storage{"inmemory": configuration.Parameters{}}
	if dir != "" {
		storage = configuration.Storage{"filesystem": configuration.Parameters{"rootdirectory": dir}}
	}
	storage["delete"] = configuration.Parameters{"enabled": true}
	cfg := &configuration.Configuration{Storage: storage}
	cfg.Log.Level = "error"
	cfg.HTTP.Secret = "anvil-local-registry" // signs upload state; the registry is loopback-only
	// distribution logs through logrus; keep its request logs out of anvil's output.
	logrus.SetOutput(io.Discard)
	var app http.Handler = handlers.NewApp(ctx, cfg)
	if auth != nil {
		app = auth.wrap(app)
	}

	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("registry: port %d on 127.0.0.1: %w", port, err)
	}
	r := &Registry{
		Host:   l.Addr().String(),
		server: &http.Server{Handler: app, ReadHeaderTimeout: 10 * time.Second},
		done:   make(chan error, 1),
	}
	go func() {
		err := r.server.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		r.done <- err
	}()
	return r, nil
}

// Stop ends the registry, letting requests in flight finish for a moment.
func (r *Registry) Stop() error {
	// Clients open spare connections that never carry a request; Shutdown counts those as
	// busy for 5 s. Close them after a short grace instead of waiting.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := r.server.Shutdown(ctx); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if err := r.server.Close(); err != nil {
			return err
		}
	}
	return <-r.done
}
