package consoleapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/rest"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	poolletv1alpha1 "github.com/anvil-dev/anvil/api/poollet/v1alpha1"
)

// pools reaches poollets' console endpoints, presenting the server's own bearer token.
type pools struct {
	token func() (string, error)
}

// readLog opens a console log stream at the endpoint; done closes the connection.
func (p *pools) readLog(ctx context.Context, ep *computev1alpha1.PoolConsoleEndpoint, req *mriv1alpha1.ReadConsoleLogRequest) (grpc.ServerStreamingClient[mriv1alpha1.ConsoleOutput], func(), error) {
	conn, err := p.dial(ep)
	if err != nil {
		return nil, nil, err
	}
	stream, err := poolletv1alpha1.NewPoolletConsoleClient(conn).ReadConsoleLog(ctx, req)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return stream, func() { conn.Close() }, nil
}

// attach opens a console at the endpoint and waits for the word that it is open (or the
// refusal); done closes the connection.
func (p *pools) attach(ctx context.Context, ep *computev1alpha1.PoolConsoleEndpoint, open *mriv1alpha1.ConsoleOpen) (grpc.BidiStreamingClient[mriv1alpha1.ConsoleInput, mriv1alpha1.ConsoleOutput], func(), error) {
	conn, err := p.dial(ep)
	if err != nil {
		return nil, nil, err
	}
	stream, err := poolletv1alpha1.NewPoolletConsoleClient(conn).AttachConsole(ctx)
	if err == nil {
		err = stream.Send(&mriv1alpha1.ConsoleInput{Open: open})
	}
	if err == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return stream, func() { conn.Close() }, nil
}

// dial connects to a poollet's endpoint, trusting only the CA its pool's status names.
func (p *pools) dial(ep *computev1alpha1.PoolConsoleEndpoint) (*grpc.ClientConn, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ep.CABundle) {
		return nil, fmt.Errorf("the console endpoint %s has no CA certificate in its pool's status", ep.Address)
	}
	return grpc.NewClient(ep.Address,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13})),
		grpc.WithPerRPCCredentials(tokenCredentials(p.token)))
}

// tokenCredentials sends the bearer token with every call, over TLS only.
type tokenCredentials func() (string, error)

func (t tokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	token, err := t()
	if err != nil {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + token}, nil
}

func (tokenCredentials) RequireTransportSecurity() bool { return true }

// bearerToken is how the server's bearer token is read: as given, or from its file each
// time (a projected ServiceAccount token is renewed in place).
func bearerToken(cfg *rest.Config) (func() (string, error), error) {
	switch {
	case cfg.BearerToken != "":
		token := cfg.BearerToken
		return func() (string, error) { return token, nil }, nil
	case cfg.BearerTokenFile != "":
		file := cfg.BearerTokenFile
		return func() (string, error) {
			raw, err := os.ReadFile(file)
			return strings.TrimSpace(string(raw)), err
		}, nil
	}
	return nil, errors.New("the console server needs a bearer token (a ServiceAccount's) to present to poollets: its credentials have none")
}
