package controlplane

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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// serviceIP is the first address of the service range, which the apiserver claims for the
// "kubernetes" Service; its serving certificate must name it.
const serviceIP = "10.0.0.1"

// Config says where a control plane keeps its state, where its binaries are and which
// loopback ports it listens on.
type Config struct {
	// StateDir holds etcd's data, keys, logs and the kubeconfig.
	StateDir string
	// BinDir holds the etcd and kube-apiserver executables.
	BinDir string
	// APIServerPort, EtcdClientPort and EtcdPeerPort are loopback ports.
	APIServerPort  int
	EtcdClientPort int
	EtcdPeerPort   int
	// Address is the address kube-apiserver binds and advertises (127.0.0.1 when empty):
	// one of this host's own, never a real external interface's. A real node's Pods reach
	// the apiserver there through the kubernetes Service, so it cannot be loopback then.
	// etcd stays on loopback.
	Address string
	// ReadyTimeout bounds the wait for etcd and then kube-apiserver to become healthy.
	ReadyTimeout time.Duration
	// AuditLog, when set, is where kube-apiserver logs every write (create, update, patch,
	// delete) as JSON lines at audit level Metadata: who, with which client, on which object —
	// never a request's body, so no Secret's value. For counting the API writes of each
	// controller (docs/benchmarks.md); nothing else is logged.
	AuditLog string
	// Workload, when set, makes this the control plane of a workload cluster, whose Nodes
	// register themselves (see Workload). anvil's own control planes leave it nil.
	Workload *Workload
}

// ControlPlane is a running etcd and kube-apiserver.
type ControlPlane struct {
	cfg       Config
	pki       pki
	lock      *os.File
	etcd      *Process
	apiserver *Process
	// controllerManager runs only for a Workload control plane.
	controllerManager *Process
	// apiserverBin is kept for RestartAPIServer.
	apiserverBin string
	rest         *rest.Config
}

// Start brings up etcd and kube-apiserver and returns once the apiserver answers /readyz.
// On any error nothing it started is left running.
func Start(ctx context.Context, cfg Config) (cp *ControlPlane, err error) {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 90 * time.Second
	}
	if cfg.StateDir, err = filepath.Abs(cfg.StateDir); err != nil {
		return nil, err
	}
	if cfg.AuditLog != "" {
		if cfg.AuditLog, err = filepath.Abs(cfg.AuditLog); err != nil {
			return nil, err
		}
	}
	if cfg.Address == "" {
		cfg.Address = "127.0.0.1"
	}
	if net.ParseIP(cfg.Address) == nil {
		return nil, fmt.Errorf("Address %q is not an IP address", cfg.Address)
	}
	names := []string{"etcd", "kube-apiserver"}
	if err := checkPortFree(cfg.Address, cfg.APIServerPort, "--apiserver-port"); err != nil {
		return nil, err
	}
	ports := []struct {
		port int
		flag string
	}{{cfg.EtcdClientPort, "--etcd-port"}, {cfg.EtcdPeerPort, "--etcd-peer-port"}}
	if cfg.Workload != nil {
		if err := cfg.Workload.check(); err != nil {
			return nil, err
		}
		names = append(names, "kube-controller-manager")
		ports = append(ports, struct {
			port int
			flag string
		}{cfg.Workload.ControllerManagerPort, "Workload.ControllerManagerPort"})
	}
	bins, err := findBinaries(cfg.BinDir, names...)
	if err != nil {
		return nil, err
	}
	etcdBin, apiserverBin := bins[0], bins[1]
	for _, p := range ports {
		if err := checkPortFree("127.0.0.1", p.port, p.flag); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"", "etcd", "logs", "run"} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, d), 0o700); err != nil {
			return nil, err
		}
	}
	cp = &ControlPlane{cfg: cfg, pki: pki{dir: filepath.Join(cfg.StateDir, "pki")}}
	if cp.lock, err = lockDir(cfg.StateDir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = cp.Stop()
		}
	}()
	if err := cp.pki.ensure(time.Now(), append(slices.Clone(cfg.Workload.servingNames()), cfg.Address)); err != nil {
		return nil, err
	}
	if err := cp.pki.writeEtcd(time.Now()); err != nil {
		return nil, fmt.Errorf("creating etcd's certificates: %w", err)
	}
	if err := cp.pki.writeFrontProxy(time.Now()); err != nil {
		return nil, fmt.Errorf("creating the front proxy's certificates: %w", err)
	}
	if cfg.Workload != nil {
		if err := cp.pki.writeKubeletClient(time.Now()); err != nil {
			return nil, fmt.Errorf("creating the apiserver's kubelet client certificate: %w", err)
		}
	}
	etcdClient, err := cp.etcdHTTPClient()
	if err != nil {
		return nil, err
	}

	logs, run := filepath.Join(cfg.StateDir, "logs"), filepath.Join(cfg.StateDir, "run")
	if cp.etcd, err = StartProcess("etcd", etcdBin, cp.etcdArgs(), logs, run); err != nil {
		return nil, err
	}
	if err := waitHealthy(ctx, cp.etcd, etcdClient, cp.EtcdURL()+"/health", cfg.ReadyTimeout); err != nil {
		return nil, err
	}
	if cp.rest, err = cp.restConfig(); err != nil {
		return nil, err
	}
	cp.apiserverBin = apiserverBin
	if err := cp.startAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := WriteKubeconfig(cp.KubeconfigPath(), cp.rest); err != nil {
		return nil, fmt.Errorf("writing the kubeconfig: %w", err)
	}
	if cfg.Workload != nil {
		if err := cp.startWorkload(ctx, bins[2]); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// startAPIServer starts kube-apiserver and waits for /readyz.
func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	var err error
	logs, run := filepath.Join(cp.cfg.StateDir, "logs"), filepath.Join(cp.cfg.StateDir, "run")
	if cp.cfg.AuditLog != "" {
		if err := os.WriteFile(cp.auditPolicy(), []byte(writesAuditPolicy), 0o600); err != nil {
			return err
		}
	}
	if cp.apiserver, err = StartProcess("kube-apiserver", cp.apiserverBin, cp.apiserverArgs(), logs, run); err != nil {
		return err
	}
	httpClient, err := rest.HTTPClientFor(cp.rest)
	if err != nil {
		return err
	}
	return waitHealthy(ctx, cp.apiserver, httpClient, cp.rest.Host+"/readyz", cp.cfg.ReadyTimeout)
}

// RestartAPIServer starts kube-apiserver again after it ended (it crashed or was killed),
// with the same port, certificates and etcd, and returns once it answers /readyz. Chaos
// runs kill it; Exited does not see the new process.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	select {
	case <-cp.apiserver.done:
	default:
		return fmt.Errorf("kube-apiserver (pid %d) is still running", cp.apiserver.PID())
	}
	return cp.startAPIServer(ctx)
}

// etcdArgs serve clients and peers on loopback with TLS, and take only clients (and
// peers) with a certificate of the etcd CA: every Secret is in etcd in the clear, and
// anything on the host (or a guest reaching the host's loopback) could otherwise read it.
func (cp *ControlPlane) etcdArgs() []string {
	p := cp.pki
	client := cp.EtcdURL()
	peer := fmt.Sprintf("https://127.0.0.1:%d", cp.cfg.EtcdPeerPort)
	return []string{
		"--name=anvil-dev",
		"--data-dir=" + filepath.Join(cp.cfg.StateDir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=anvil-dev=" + peer,
		"--client-cert-auth",
		"--trusted-ca-file=" + p.etcdCACert(),
		"--cert-file=" + p.etcdCert(),
		"--key-file=" + p.etcdKey(),
		"--peer-client-cert-auth",
		"--peer-trusted-ca-file=" + p.etcdCACert(),
		"--peer-cert-file=" + p.etcdCert(),
		"--peer-key-file=" + p.etcdKey(),
		"--log-level=warn",
	}
}

func (cp *ControlPlane) apiserverArgs() []string {
	p := cp.pki
	args := []string{
		"--etcd-servers=" + cp.EtcdURL(),
		"--etcd-cafile=" + p.etcdCACert(),
		"--etcd-certfile=" + p.etcdClientCert(),
		"--etcd-keyfile=" + p.etcdClientKey(),
		"--bind-address=" + cp.cfg.Address,
		"--advertise-address=" + cp.cfg.Address,
		"--secure-port=" + strconv.Itoa(cp.cfg.APIServerPort),
		"--tls-cert-file=" + p.servingCert(),
		"--tls-private-key-file=" + p.servingKey(),
		"--token-auth-file=" + p.tokens(),
		"--authorization-mode=" + cp.cfg.Workload.authorizationMode(),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + p.saPub(),
		"--service-account-signing-key-file=" + p.saKey(),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--cert-dir=" + filepath.Join(cp.cfg.StateDir, "pki", "generated"),
		// Aggregated API servers (anvil's console server): how kube-apiserver vouches for
		// the user of a request it passes on (docs/console.md).
		"--proxy-client-cert-file=" + p.frontProxyClientCert(),
		"--proxy-client-key-file=" + p.frontProxyClientKey(),
		"--requestheader-client-ca-file=" + p.frontProxyCACert(),
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
	}
	if cp.cfg.Workload != nil {
		args = append(args, workloadAPIServerArgs(p)...)
	}
	if cp.cfg.AuditLog != "" {
		args = append(args, "--audit-policy-file="+cp.auditPolicy(), "--audit-log-path="+cp.cfg.AuditLog,
			"--audit-log-format=json", "--audit-log-maxage=0", "--audit-log-maxbackup=0", "--audit-log-maxsize=0")
	}
	return args
}

// writesAuditPolicy logs writes at Metadata level, once each (when the response is sent),
// and nothing else.
const writesAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

func (cp *ControlPlane) auditPolicy() string {
	return filepath.Join(cp.cfg.StateDir, "audit-policy.yaml")
}

// EtcdURL is etcd's client URL (TLS; a client certificate of EtcdClientFiles is required).
func (cp *ControlPlane) EtcdURL() string {
	return fmt.Sprintf("https://127.0.0.1:%d", cp.cfg.EtcdClientPort)
}

// EtcdClientFiles are the etcd CA and the apiserver's etcd client certificate and key,
// valid until the next start.
func (cp *ControlPlane) EtcdClientFiles() (ca, cert, key string) {
	return cp.pki.etcdCACert(), cp.pki.etcdClientCert(), cp.pki.etcdClientKey()
}

// etcdHTTPClient speaks to etcd as the apiserver does, for the health check.
func (cp *ControlPlane) etcdHTTPClient() (*http.Client, error) {
	caFile, certFile, keyFile := cp.EtcdClientFiles()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("etcd's client certificate: %w", err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s holds no certificate", caFile)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}

func (cp *ControlPlane) restConfig() (*rest.Config, error) {
	caPEM, err := os.ReadFile(cp.pki.caCert())
	if err != nil {
		return nil, err
	}
	token, err := os.ReadFile(cp.pki.adminToken())
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            "https://" + net.JoinHostPort(cp.cfg.Address, strconv.Itoa(cp.cfg.APIServerPort)),
		BearerToken:     strings.TrimSpace(string(token)),
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
	}, nil
}

// RESTConfig returns a copy of the admin client configuration.
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.rest) }

// KubeconfigPath is where Start wrote the admin kubeconfig.
func (cp *ControlPlane) KubeconfigPath() string {
	return filepath.Join(cp.cfg.StateDir, "kubeconfig")
}

// PIDs returns the process ids of etcd and kube-apiserver, for telling the user.
func (cp *ControlPlane) PIDs() (etcd, apiserver int) { return cp.etcd.PID(), cp.apiserver.PID() }

// ControllerManagerPID is kube-controller-manager's process id (a Workload control plane),
// or 0.
func (cp *ControlPlane) ControllerManagerPID() int {
	if cp.controllerManager == nil {
		return 0
	}
	return cp.controllerManager.PID()
}

// StateDir is the absolute path of the state directory.
func (cp *ControlPlane) StateDir() string { return cp.cfg.StateDir }

// LogDir is where each process writes its log.
func (cp *ControlPlane) LogDir() string { return filepath.Join(cp.cfg.StateDir, "logs") }

// Exited is closed when etcd or kube-apiserver ends; ExitError then says which and why.
func (cp *ControlPlane) Exited() <-chan error {
	ch := make(chan error, 1)
	var controllerManager <-chan struct{} // nil (never ready) without a Workload
	if cp.controllerManager != nil {
		controllerManager = cp.controllerManager.done
	}
	go func() {
		select {
		case <-cp.etcd.done:
			ch <- cp.etcd.exitError()
		case <-cp.apiserver.done:
			ch <- cp.apiserver.exitError()
		case <-controllerManager:
			ch <- cp.controllerManager.exitError()
		}
	}()
	return ch
}

// Stop ends kube-controller-manager (if any) and kube-apiserver first, so it flushes its
// writes, then etcd, then releases the state directory. It is safe to call on a partly
// started control plane.
func (cp *ControlPlane) Stop() error {
	var errs []error
	if cp.controllerManager != nil {
		errs = append(errs, cp.controllerManager.Stop(30*time.Second))
	}
	if cp.apiserver != nil {
		errs = append(errs, cp.apiserver.Stop(30*time.Second))
	}
	if cp.etcd != nil {
		errs = append(errs, cp.etcd.Stop(30*time.Second))
	}
	if cp.lock != nil {
		errs = append(errs, cp.lock.Close())
	}
	return errors.Join(errs...)
}

// findBinaries returns the paths of the named executables in binDir, in order.
func findBinaries(binDir string, names ...string) ([]string, error) {
	paths := make([]string, len(names))
	for i, name := range names {
		paths[i] = filepath.Join(binDir, name)
		info, statErr := os.Stat(paths[i])
		if statErr != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("%s not found in %s: run \"make tools\" in the anvil checkout to build it, or pass --bin-dir with the folder that holds %s", name, binDir, strings.Join(names, " and "))
		}
	}
	return paths, nil
}

func checkPortFree(addr string, port int, flag string) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("%s %d is not a port: use a number from 1 to 65535", flag, port)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on %s is already in use (%v): stop whatever holds it (another \"anvil dev\"?) or choose a free port with %s", port, addr, err, flag)
	}
	return l.Close()
}

// lockDir takes an exclusive lock on the state directory for as long as the returned
// file stays open, so two control planes never share one etcd data directory.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("state directory %s is in use by another anvil dev: stop that one first, or pass --state-dir with another folder", dir)
	}
	return f, nil
}

// waitHealthy polls url until it answers 200, the process exits, or timeout passes.
func waitHealthy(ctx context.Context, p *Process, c *http.Client, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become healthy at %s within %s; its log is %s:\n%s", p.name, url, timeout, p.logPath, LogTail(p.logPath, 15))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return p.exitError()
		case <-tick.C:
		}
	}
}
