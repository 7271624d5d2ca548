package consoleproxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	poolletv1alpha1 "github.com/anvil-dev/anvil/api/poollet/v1alpha1"
	"github.com/anvil-dev/anvil/internal/pki"
)

// maxStreams bounds the console streams one caller's connection holds at once.
const maxStreams = 64

// caValidity: the CA and its serving certificate are made anew at every start of the
// poollet and published in the pool's status, so they need not outlive it by much.
const caValidity = 10 * 365 * 24 * time.Hour

// Endpoint serves a Server over TLS, with a serving certificate of a CA made as it starts.
type Endpoint struct {
	lis net.Listener
	srv *grpc.Server
	// Status is what the MachinePool's status says of it.
	Status computev1alpha1.PoolConsoleEndpoint
}

// Listen listens on address (host:port; the host must be an address clients dial, not a
// wildcard, since the certificate names it) for s.
func Listen(address string, s *Server) (*Endpoint, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("console endpoint %q: %w", address, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return nil, fmt.Errorf("console endpoint %q: name the address its clients dial, not a wildcard: its certificate names it", address)
	}
	ca, err := pki.NewCA("anvil-poollet-console-ca", caValidity)
	if err != nil {
		return nil, err
	}
	cert, err := ca.IssueServing(host)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("console endpoint: %w", err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})),
		grpc.MaxConcurrentStreams(maxStreams))
	poolletv1alpha1.RegisterPoolletConsoleServer(srv, s)
	return &Endpoint{lis: lis, srv: srv, Status: computev1alpha1.PoolConsoleEndpoint{Address: lis.Addr().String(), CABundle: ca.PEM}}, nil
}

// Start serves until ctx ends (a controller-runtime Runnable).
func (e *Endpoint) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		e.srv.Stop()
	}()
	return e.srv.Serve(e.lis)
}
