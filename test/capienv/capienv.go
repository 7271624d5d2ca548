package capienv

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
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/anvil-dev/anvil/api"
	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/test/harness"
)

// Options say how to run the manager.
type Options struct {
	// FeatureGates are passed as --feature-gates (e.g. InPlaceUpdates and RuntimeSDK, which
	// in-place updates need together). Empty: Cluster API's defaults.
	FeatureGates map[string]bool
	// Args are more flags for the manager (e.g. --runtime-extension-client-cert-file).
	Args []string
	// Dir holds the manager's log, kubeconfig and nothing else. Empty: a temporary
	// folder that Stop removes.
	Dir string
	// ReadyTimeout bounds the wait for the manager to be ready; default 2 minutes.
	ReadyTimeout time.Duration
}

// stopGrace is how long Stop waits after SIGTERM: the manager's controllers get 30 s to
// drain by default, but tests need them gone, not drained.
const stopGrace = 15 * time.Second

// CAPI is a running Cluster API core manager and what it serves.
type CAPI struct {
	dir        string
	ownDir     bool
	logPath    string
	kubeconfig string
	healthAddr string
	webhooks   envtest.WebhookInstallOptions

	proc *controlplane.Process

	mu       sync.Mutex
	stopping bool
	stopped  bool
	stopErr  error
}

// Start installs Cluster API into the apiserver of cfg (its CRDs labelled for clusterctl,
// converting through the manager; its webhook configurations; clusterctl's inventory CRD)
// and anvil's provider (its CRDs and the ClusterRole for Cluster API's manager), then runs
// bin/capi-manager against it and waits until its health endpoint and webhooks answer.
// Start again after Stop (on the same or another apiserver) to change feature gates: each
// Start installs anew, with new ports and certificates.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (*CAPI, error) {
	binDir, err := harness.AssetsDir()
	if err != nil {
		return nil, err
	}
	f, err := locate(binDir)
	if err != nil {
		return nil, err
	}
	c := &CAPI{dir: opts.Dir}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "anvil-capi-"); err != nil {
			return nil, err
		}
		c.ownDir = true
	}
	c.logPath = filepath.Join(c.dir, "capi-manager.log")
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	started := false
	defer func() {
		if !started {
			c.cleanup()
		}
	}()

	scheme, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	if c.webhooks, err = installWebhooks(cfg, f); err != nil {
		return nil, err
	}
	if err := installCRDs(cfg, f, c.webhooks); err != nil {
		return nil, err
	}
	if err := installAnvilProvider(ctx, cl); err != nil {
		return nil, err
	}
	if err := controlplane.WriteKubeconfig(c.kubeconfig, cfg); err != nil {
		return nil, fmt.Errorf("writing the manager's kubeconfig: %w", err)
	}
	healthPort, err := harness.LoopbackPort()
	if err != nil {
		return nil, err
	}
	diagnosticsPort, err := harness.LoopbackPort()
	if err != nil {
		return nil, err
	}
	c.healthAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(healthPort))
	args := []string{
		"--kubeconfig", c.kubeconfig,
		// The webhook server has no host flag in v1.14: it listens on every interface, on
		// a free port envtest chose on 127.0.0.1 (where the apiserver calls it).
		"--webhook-port", strconv.Itoa(c.webhooks.LocalServingPort),
		"--webhook-cert-dir", c.webhooks.LocalServingCertDir,
		"--health-addr", c.healthAddr,
		"--diagnostics-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(diagnosticsPort)),
		"--insecure-diagnostics",
	}
	if gates := featureGates(opts.FeatureGates); gates != "" {
		args = append(args, "--feature-gates", gates)
	}
	args = append(args, opts.Args...)
	// internal/controlplane's supervisor: its own process group keeps a terminal's Ctrl-C for
	// the test binary, which stops it; Pdeathsig ends it when the test binary dies first.
	if c.proc, err = controlplane.StartProcess("capi-manager", f.manager, args, c.dir, ""); err != nil {
		return nil, err
	}
	started = true
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	if err := c.waitReady(ctx, timeout); err != nil {
		c.mu.Lock()
		c.stopping = true // the error says why; Stop need not report the exit again
		c.mu.Unlock()
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// featureGates is the --feature-gates value for gates, in name order.
func featureGates(gates map[string]bool) string {
	var pairs []string
	for name, on := range gates {
		pairs = append(pairs, name+"="+strconv.FormatBool(on))
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

// waitReady polls until the manager's readyz answers 200 and its webhook server completes a
// TLS handshake with the certificate the apiserver was told to trust.
func (c *CAPI) waitReady(ctx context.Context, timeout time.Duration) error {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(c.webhooks.LocalServingCAData) {
		return errors.New("envtest gave no webhook CA certificate")
	}
	webhookAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(c.webhooks.LocalServingPort))
	httpClient := &http.Client{Timeout: time.Second}
	ready := func() bool {
		resp, err := httpClient.Get("http://" + c.healthAddr + "/readyz")
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
	for !ready() {
		if err := c.proc.Exited(); err != nil {
			return fmt.Errorf("capi-manager ended while starting: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("capi-manager not ready (readyz on %s, webhooks on %s) after %s; last lines of %s:\n%s",
				c.healthAddr, webhookAddr, timeout, c.logPath, controlplane.LogTail(c.logPath, 20))
		case <-tick.C:
		}
	}
	return nil
}

// Stop ends the manager it started, by its PID: SIGTERM, then SIGKILL after stopGrace,
// and waits until the process is gone; then it removes the serving certificates (and Dir
// when Start made it). It reports a manager that had already exited on its own. A second
// call does nothing. Cluster API's webhook configurations and CRDs stay installed: until
// the next Start, writes to Cluster API's kinds are refused (their webhooks do not answer).
func (c *CAPI) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true
	if err := c.proc.Exited(); err != nil {
		if !c.stopping {
			c.stopErr = fmt.Errorf("capi-manager had exited before Stop: %w", err)
		}
	} else {
		c.stopping = true
		// Killed after stopGrace: gone either way, which is all Stop promises.
		_ = c.proc.Stop(stopGrace)
	}
	c.cleanup()
	return c.stopErr
}

func (c *CAPI) cleanup() {
	_ = c.webhooks.Cleanup()
	if c.ownDir {
		_ = os.RemoveAll(c.dir)
	}
}

// PID is the manager process's id.
func (c *CAPI) PID() int { return c.proc.PID() }

// LogPath is the manager's log file (gone after Stop when Start made the folder).
func (c *CAPI) LogPath() string { return c.logPath }

// Kubeconfig is the path of the admin kubeconfig the manager uses (for clusterctl too).
func (c *CAPI) Kubeconfig() string { return c.kubeconfig }

// HealthAddr is the manager's health endpoint (/healthz, /readyz), on 127.0.0.1.
func (c *CAPI) HealthAddr() string { return c.healthAddr }

// WebhookPort is the port of the manager's webhook server, which the apiserver calls on
// 127.0.0.1.
func (c *CAPI) WebhookPort() int { return c.webhooks.LocalServingPort }
