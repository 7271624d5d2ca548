package capi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/anvil-dev/anvil/internal/capi/identity"
)

// dialer connects to a remote control plane only at addresses identity.CheckAddresses
// accepts, resolving the name itself and dialing the address it checked (no second lookup
// a rebinding name server could answer differently).
func dialer(allowLoopback bool) func(ctx context.Context, network, address string) (net.Conn, error) {
	d := &net.Dialer{Timeout: remoteDialTimeout}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(host); err == nil {
			addrs = []netip.Addr{a}
		} else if addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, fmt.Errorf("resolving %s: %w", host, err)
		}
		if err := identity.CheckAddresses(host, addrs, allowLoopback); err != nil {
			return nil, err
		}
		var last error
		for _, a := range addrs {
			conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil {
				return conn, nil
			}
			last = err
		}
		return nil, last
	}
}

// unreachable says why the control plane of id could not be used, as a short class of
// failure: never the remote's answer or the dialer's own words, which would let a tenant
// read other hosts through the condition.
func unreachable(id identity.Identity, err error) error {
	host := id.Host()
	var addr *identity.AddressError
	var status apierrors.APIStatus
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var netErr net.Error
	switch {
	case errors.As(err, &addr):
		return addr
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the anvil control plane at %s refused the identity's credentials (401)", host)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("the anvil control plane at %s does not let the identity list anvil Machines in namespace %s (403)", host, id.Namespace)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the control plane at %s serves no anvil Machines (404): is it an anvil control plane?", host)
	case errors.As(err, &status):
		return fmt.Errorf("the control plane at %s refused the request (HTTP %d)", host, status.Status().Code)
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verify):
		return fmt.Errorf("the control plane at %s presented a TLS certificate the identity's certificate-authority-data does not verify for it", host)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("the control plane at %s refused the connection", host)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("the control plane at %s did not answer in time", host)
	}
	return fmt.Errorf("the control plane at %s did not answer as a Kubernetes API server", host)
}
