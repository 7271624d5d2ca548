package mri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// socketPath returns the path of a unix:// endpoint.
func socketPath(endpoint string) (string, error) {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok || path == "" {
		return "", fmt.Errorf("runtime endpoint %q: use unix:///absolute/path.sock", endpoint)
	}
	return path, nil
}

// Listen opens the unix socket of endpoint, replacing a stale socket file left by a
// runtime that died, but refusing one another runtime is still serving on. Its folder is
// made (0750) when missing, and refused when anyone but its owner may write to it.
func Listen(endpoint string) (net.Listener, error) {
	path, err := socketPath(endpoint)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := checkSocketDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err == nil {
		if c, dialErr := net.Dial("unix", path); dialErr == nil {
			c.Close()
			return nil, fmt.Errorf("%s is in use by a running runtime: stop it first or choose another --socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	return l, os.Chmod(path, 0o600)
}

// Serve serves rt on endpoint until ctx ends.
func Serve(ctx context.Context, endpoint string, rt mriv1alpha1.MachineRuntimeServer, opts ...Option) error {
	l, err := Listen(endpoint)
	if err != nil {
		return err
	}
	return ServeListener(ctx, l, rt, opts...)
}

// ServeListener serves rt on l until ctx ends. Listening first lets a caller know the
// socket exists before it dials. Clients not running as an allowed user (the process's
// own, and AllowPeers') are refused.
func ServeListener(ctx context.Context, l net.Listener, rt mriv1alpha1.MachineRuntimeServer, opts ...Option) error {
	o := optionsOf(opts)
	serverOpts := []grpc.ServerOption{grpc.Creds(newPeerCheck(o))}
	if o.journal != "" {
		j, err := openJournal(o.journal)
		if err != nil {
			return err
		}
		defer j.Close()
		serverOpts = append(serverOpts, grpc.UnaryInterceptor(j.intercept))
	}
	s := grpc.NewServer(serverOpts...)
	mriv1alpha1.RegisterMachineRuntimeServer(s, rt)
	go func() {
		<-ctx.Done()
		s.GracefulStop()
	}()
	if err := s.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Dial returns a client for the runtime at endpoint. It connects lazily, so a runtime
// that is down now is reached once it is back. A runtime not running as an allowed user
// (the process's own, and AllowPeers') is refused before anything is sent.
func Dial(endpoint string, opts ...Option) (mriv1alpha1.MachineRuntimeClient, *grpc.ClientConn, error) {
	path, err := socketPath(endpoint)
	if err != nil {
		return nil, nil, err
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(newPeerCheck(optionsOf(opts))))
	if err != nil {
		return nil, nil, err
	}
	return mriv1alpha1.NewMachineRuntimeClient(conn), conn, nil
}
