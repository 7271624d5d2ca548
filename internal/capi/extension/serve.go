package extension

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options say where and how the extension is served.
type Options struct {
	// BindAddress is host:port of the HTTPS endpoint; empty turns the extension off.
	BindAddress string
	// CertDir holds the serving certificate and key, tls.crt and tls.key. When they are
	// missing, a self-signed certificate for 127.0.0.1 (and the bind address's IP) is made
	// there: its tls.crt is then the caBundle of the ExtensionConfig.
	CertDir string
	// ClientCAFile is a PEM file of the CAs whose client certificates may call the
	// extension: the CA of Cluster API's --runtime-extension-client-cert-file. Required:
	// UpdateMachine reports reimages, and only Cluster API should ask.
	ClientCAFile string
}

// Names of the files in Options.CertDir.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// Validate says what to fix in o; an empty BindAddress (off) needs nothing else.
func (o Options) Validate() error {
	if o.BindAddress == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(o.BindAddress); err != nil || port == "" {
		return fmt.Errorf("--capi-extension-bind-address must be HOST:PORT, not %q", o.BindAddress)
	}
	if o.CertDir == "" {
		return errors.New("--capi-extension-cert-dir is required with --capi-extension-bind-address: it holds (or receives) the serving certificate")
	}
	if o.ClientCAFile == "" {
		return errors.New("--capi-extension-client-ca is required with --capi-extension-bind-address: only Cluster API, holding a client certificate that CA signed, may call the extension")
	}
	if _, err := certutil.NewPool(o.ClientCAFile); err != nil {
		return fmt.Errorf("--capi-extension-client-ca: %w", err)
	}
	return nil
}

// EnsureServingCert makes a self-signed serving certificate in dir unless tls.crt and
// tls.key are there: valid for 127.0.0.1, localhost and the IP of bindAddress, for a year.
// Its CA's key is not kept, so nothing else can be signed with it.
func EnsureServingCert(dir, bindAddress string) error {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	if ok, err := certutil.CanReadCertAndKey(certPath, keyPath); err != nil || ok {
		return err
	}
	var ips []net.IP
	if host, _, err := net.SplitHostPort(bindAddress); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && !ip.Equal(net.IPv4(127, 0, 0, 1)) {
			ips = append(ips, ip)
		}
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", ips, []string{"localhost"})
	if err != nil {
		return fmt.Errorf("making the extension's serving certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The key first: a certificate without its key is not taken for a pair at the next start.
	if err := keyutil.WriteKey(keyPath, keyPEM); err != nil {
		return err
	}
	return certutil.WriteCert(certPath, certPEM)
}

// TLSConfig serves the certificate in o.CertDir and takes only clients with a certificate
// one of o.ClientCAFile's CAs signed.
func (o Options) TLSConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(o.CertDir, CertFile), filepath.Join(o.CertDir, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("loading the extension's serving certificate from %s: %w", o.CertDir, err)
	}
	pool, err := certutil.NewPool(o.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("loading the client CA %s: %w", o.ClientCAFile, err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}, nil
}

// Runnable serves the extension inside a controller-runtime manager (mgr.Add).
type Runnable struct {
	Options  Options
	Reader   client.Reader
	Machines Machines
	Log      logr.Logger
}

// NeedLeaderElection is false: every replica answers from its own cache, and only reads.
func (r *Runnable) NeedLeaderElection() bool { return false }

// Start makes the serving certificate if needed, listens on Options.BindAddress and serves
// until ctx ends.
func (r *Runnable) Start(ctx context.Context) error {
	if err := EnsureServingCert(r.Options.CertDir, r.Options.BindAddress); err != nil {
		return err
	}
	cfg, err := r.Options.TLSConfig()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", r.Options.BindAddress)
	if err != nil {
		return fmt.Errorf("--capi-extension-bind-address: %w", err)
	}
	r.Log.Info("serving Cluster API's in-place update hooks", "address", ln.Addr().String())
	return Serve(ctx, ln, cfg, (&Server{Reader: r.Reader, Machines: r.Machines, Log: r.Log}).Handler(), r.Log)
}

// Serve serves h over TLS on ln until ctx ends, then shuts down within a few seconds.
// Refused handshakes (a caller without Cluster API's client certificate) go to log.
func Serve(ctx context.Context, ln net.Listener, cfg *tls.Config, h http.Handler, log logr.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ErrorLog:          stdlog.New(logWriter{log}, "", 0),
		TLSConfig:         cfg,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(tls.NewListener(ln, cfg)) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// logWriter carries net/http's error log (one line per write) to a logr.Logger.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
