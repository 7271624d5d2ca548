package clusterapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	"github.com/anvil-dev/anvil/internal/controlplane"
)

// Options say which of Cluster API's managers to run, and how.
type Options struct {
	// BinDir holds the managers' binaries and bin/capi (make tools).
	BinDir string
	// Providers to run; empty means CoreOnly. The core provider must be first: the others'
	// webhooks and controllers read its kinds.
	Providers []Provider
	// FeatureGates are passed as --feature-gates to every provider (e.g. InPlaceUpdates and
	// RuntimeSDK, which in-place updates need together). Empty: Cluster API's defaults.
	FeatureGates map[string]bool
	// Args are more flags for the core manager (e.g. --runtime-extension-client-cert-file,
	// --sync-period).
	Args []string
	// ControlPlaneArgs are more flags for KubeadmControlPlane's manager (e.g. its etcd
	// timeouts), when it runs.
	ControlPlaneArgs []string
	// Dir holds the managers' logs and kubeconfig. Empty: a temporary folder that Stop
	// removes.
	Dir string
	// ReadyTimeout bounds the wait for the managers to be ready; default 2 minutes.
	ReadyTimeout time.Duration
}

// stopGrace is how long Stop waits after SIGTERM: the managers' controllers get 30 s to
// drain by default, but a stop wants them gone, not drained.
const stopGrace = 15 * time.Second

// Manager is one running provider and what it serves.
type Manager struct {
	Provider   Provider
	healthAddr string
	webhooks   webhookServer
	proc       *controlplane.Process
}

// PID is the manager process's id.
func (m *Manager) PID() int { return m.proc.PID() }

// LogPath is the manager's log file.
func (m *Manager) LogPath() string { return m.proc.LogPath() }

// HealthAddr is the manager's health endpoint (/healthz, /readyz), on 127.0.0.1.
func (m *Manager) HealthAddr() string { return m.healthAddr }

// WebhookPort is the port of the manager's webhook server, which the apiserver calls on
// 127.0.0.1.
func (m *Manager) WebhookPort() int { return m.webhooks.port }

// Managers are the running providers Start started.
type Managers struct {
	dir        string
	ownDir     bool
	kubeconfig string
	managers   []*Manager
	// installed are the webhook servers of every provider installed, started or not, so
	// that a failed Start removes their certificates.
	installed []webhookServer

	mu       sync.Mutex
	stopping bool
	stopped  bool
	stopErr  error
}

// Start installs the providers of o into the apiserver of cfg (see the package doc), runs
// them, and waits until each one's health endpoint and webhooks answer. Start again after
// Stop (on the same or another apiserver) to change feature gates: each Start installs anew,
// with new ports and certificates.
func Start(ctx context.Context, cfg *rest.Config, o Options) (*Managers, error) {
	providers := o.Providers
	if len(providers) == 0 {
		providers = CoreOnly
	}
	if providers[0].Name != Core.Name {
		return nil, fmt.Errorf("the providers to run must start with %s", Core.Name)
	}
	fs, err := locate(o.BinDir, providers)
	if err != nil {
		return nil, err
	}
	m := &Managers{dir: o.Dir}
	if m.dir == "" {
		if m.dir, err = os.MkdirTemp("", "anvil-capi-"); err != nil {
			return nil, err
		}
		m.ownDir = true
	} else if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return nil, err
	}
	m.kubeconfig = filepath.Join(m.dir, "kubeconfig")
	started := false
	defer func() {
		if !started {
			m.cleanup()
		}
	}()
	if err := controlplane.WriteKubeconfig(m.kubeconfig, cfg); err != nil {
		return nil, fmt.Errorf("writing the managers' kubeconfig: %w", err)
	}
	scheme, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	if err := installInventoryCRD(ctx, c, fs); err != nil {
		return nil, err
	}
	// Everything is installed before any manager starts: a provider's controllers read the
	// others' kinds (KubeadmControlPlane makes KubeadmConfigs).
	for i, p := range providers {
		wh, err := newWebhookServer(p)
		if err != nil {
			return nil, err
		}
		m.installed = append(m.installed, wh)
		if err := installWebhooks(ctx, c, p, fs.providers[i], wh); err != nil {
			return nil, err
		}
		if err := installCRDs(ctx, c, p, fs.providers[i], wh); err != nil {
			return nil, err
		}
		m.managers = append(m.managers, &Manager{Provider: p, webhooks: wh})
	}
	started = true // from here Stop cleans up
	for i, mgr := range m.managers {
		var args []string
		switch {
		case i == 0:
			args = o.Args
		case mgr.Provider.Name == KubeadmControlPlane.Name:
			args = o.ControlPlaneArgs
		}
		if err := m.run(mgr, fs.providers[i].binary, o.FeatureGates, args); err != nil {
			return nil, errors.Join(err, m.Stop())
		}
	}
	timeout := o.ReadyTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	for _, mgr := range m.managers {
		if err := mgr.waitReady(ctx, timeout); err != nil {
			m.mu.Lock()
			m.stopping = true // the error says why; Stop need not report the exit again
			m.mu.Unlock()
			return nil, errors.Join(err, m.Stop())
		}
	}
	return m, nil
}

// run starts mgr's binary on loopback ports of its own.
func (m *Managers) run(mgr *Manager, binary string, gates map[string]bool, more []string) error {
	healthPort, err := managerPort()
	if err != nil {
		return err
	}
	diagnosticsPort, err := managerPort()
	if err != nil {
		return err
	}
	mgr.healthAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(healthPort))
	args := []string{
		"--kubeconfig", m.kubeconfig,
		// The webhook server has no host flag in v1.14: it listens on every interface, on
		// a free port chosen on 127.0.0.1 (where the apiserver calls it).
		"--webhook-port", strconv.Itoa(mgr.webhooks.port),
		"--webhook-cert-dir", mgr.webhooks.certDir,
		"--health-addr", mgr.healthAddr,
		"--diagnostics-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(diagnosticsPort)),
		"--insecure-diagnostics",
	}
	if g := FeatureGates(gates); g != "" {
		args = append(args, "--feature-gates", g)
	}
	args = append(args, more...)
	// internal/controlplane's supervisor: its own process group keeps a terminal's Ctrl-C
	// for the parent, which stops it; Pdeathsig ends it when the parent dies first.
	mgr.proc, err = controlplane.StartProcess(mgr.Provider.Binary, binary, args, m.dir, "")
	return err
}

// InPlaceGates are the feature gates in-place updates need: with InPlaceUpdates alone the
// core manager's Machine controllers do not start. A manager with them calls the update
// extension (the core manager and KubeadmControlPlane's), and needs its client certificate
// (RuntimeExtensionClientArgs).
func InPlaceGates() map[string]bool {
	return map[string]bool{"InPlaceUpdates": true, "RuntimeSDK": true}
}

// RuntimeExtensionClientArgs are the flags that make a manager present the client
// certificate certFile (key keyFile) to Runtime SDK extensions, anvil's in-place update
// extension among them, which answers only callers with a certificate its client CA signed.
func RuntimeExtensionClientArgs(certFile, keyFile string) []string {
	return []string{"--runtime-extension-client-cert-file", certFile, "--runtime-extension-client-key-file", keyFile}
}

// FeatureGates is the --feature-gates value for gates, in name order.
func FeatureGates(gates map[string]bool) string {
	var pairs []string
	for name, on := range gates {
		pairs = append(pairs, name+"="+strconv.FormatBool(on))
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

// waitReady polls until the manager's readyz answers 200 and its webhook server completes a
// TLS handshake with the certificate the apiserver was told to trust.
func (mgr *Manager) waitReady(ctx context.Context, timeout time.Duration) error {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(mgr.webhooks.caPEM) {
		return fmt.Errorf("no CA certificate for the webhooks of %s", mgr.Provider.Name)
	}
	webhookAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(mgr.webhooks.port))
	httpClient := &http.Client{Timeout: time.Second}
	ready := func() bool {
		resp, err := httpClient.Get("http://" + mgr.healthAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", webhookAddr,
			&tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
		if err != nil {
			return false
		}
		conn.Close()
		return true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	name := mgr.Provider.Binary
	for !ready() {
		if err := mgr.proc.Exited(); err != nil {
			return fmt.Errorf("%s ended while starting: %w; last lines of %s:\n%s", name, err, mgr.LogPath(), controlplane.LogTail(mgr.LogPath(), 20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%s not ready (readyz on %s, webhooks on %s) after %s; last lines of %s:\n%s",
				name, mgr.healthAddr, webhookAddr, timeout, mgr.LogPath(), controlplane.LogTail(mgr.LogPath(), 20))
		case <-tick.C:
		}
	}
	return nil
}

// Stop ends the managers it started, by their PIDs: SIGTERM, then SIGKILL after stopGrace,
// and waits until the processes are gone; then it removes the serving certificates (and Dir
// when Start made it). It reports a manager that had already exited on its own. A second
// call does nothing. The providers' webhook configurations and CRDs stay installed: until
// the next Start, writes to their kinds are refused (their webhooks do not answer).
func (m *Managers) Stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return m.stopErr
	}
	m.stopped = true
	var wg sync.WaitGroup
	errs := make([]error, len(m.managers))
	for i, mgr := range m.managers {
		if mgr.proc == nil {
			continue
		}
		if err := mgr.proc.Exited(); err != nil {
			if !m.stopping {
				errs[i] = fmt.Errorf("%s had exited before Stop: %w", mgr.Provider.Binary, err)
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Killed after stopGrace: gone either way, which is all Stop promises.
			_ = mgr.proc.Stop(stopGrace)
		}()
	}
	wg.Wait()
	m.stopping = true
	m.cleanup()
	m.stopErr = errors.Join(errs...)
	return m.stopErr
}

func (m *Managers) cleanup() {
	for _, wh := range m.installed {
		_ = os.RemoveAll(wh.certDir)
	}
	if m.ownDir {
		_ = os.RemoveAll(m.dir)
	}
}

// Kubeconfig is the path of the admin kubeconfig the managers use (for clusterctl too).
func (m *Managers) Kubeconfig() string { return m.kubeconfig }

// Dir is the folder of the managers' logs and kubeconfig.
func (m *Managers) Dir() string { return m.dir }

// Managers are the running providers, in the order of Options.Providers.
func (m *Managers) Managers() []*Manager { return m.managers }

// Manager is the running provider of that clusterctl name, or nil.
func (m *Managers) Manager(name string) *Manager {
	for _, mgr := range m.managers {
		if mgr.Provider.Name == name {
			return mgr
		}
	}
	return nil
}

// managerPort is a port free now on every interface (the webhook server listens on all of
// them) and below the kernel's ephemeral range, for a manager to listen on a moment later
// (config's test once saw a kernel-given port taken meanwhile).
func managerPort() (int, error) { return controlplane.PortBelowEphemeral("") }
