package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Workload makes a control plane the one of a workload cluster whose Nodes register
// themselves the way kubelets do, as the Cluster API tests need: the apiserver takes
// bootstrap tokens and client certificates of the cluster CA and authorizes nodes
// (Node,RBAC and the NodeRestriction admission plugin), and a kube-controller-manager signs
// and approves the nodes' certificate requests, manages bootstrap tokens and marks a Node
// whose Lease and status stop being renewed NotReady (Ready=Unknown).
type Workload struct {
	// ControllerManagerPort is the loopback port kube-controller-manager serves its health
	// on (HTTPS, a certificate of the cluster CA).
	ControllerManagerPort int
	// NodeMonitorGracePeriod is how long a Node may go without a Lease renewal or a status
	// update before it is marked NotReady; DefaultNodeMonitorGracePeriod when 0. It must be
	// longer than the nodes' renewal interval (the node agent's --lease-interval).
	NodeMonitorGracePeriod time.Duration
	// ServingNames are more names (IP addresses or DNS names) the apiserver's serving
	// certificate is valid for: the address the nodes dial when it is not 127.0.0.1, such
	// as the address of a QEMU guest's forward to the apiserver.
	ServingNames []string
	// Controllers are the kube-controller-manager controllers to run (its --controllers);
	// nil runs the few a self-registering node needs (workloadControllers). A cluster that
	// runs Pods on a real kubelet passes {"*"}: service accounts, the root CA ConfigMap,
	// Deployments, DaemonSets, EndpointSlices, garbage collection, ...
	Controllers []string
}

// DefaultNodeMonitorGracePeriod is short (kube-controller-manager's own default is 50 s) so
// a test sees a stopped node go NotReady soon, and twice a node agent's Lease interval.
const DefaultNodeMonitorGracePeriod = 20 * time.Second

// nodeMonitorPeriod is how often kube-controller-manager looks at the Nodes' health.
const nodeMonitorPeriod = time.Second

// workloadControllers are the controllers a self-registering node needs: CSR signing,
// approval and clean-up, the bootstrap token signer and cleaner, and node lifecycle. The
// rest of the default set (deployments, garbage collection, ...) is left off: the nodes
// run no Pods, and each controller costs CPU on a shared test machine.
var workloadControllers = []string{
	"certificatesigningrequest-signing-controller",
	"certificatesigningrequest-approving-controller",
	"certificatesigningrequest-cleaner-controller",
	"bootstrap-signer-controller",
	"token-cleaner-controller",
	"node-lifecycle-controller",
}

// check refuses settings kube-controller-manager or the serving certificate cannot take.
func (w *Workload) check() error {
	if w.NodeMonitorGracePeriod < 0 {
		return fmt.Errorf("Workload.NodeMonitorGracePeriod %s is negative: give a duration above the nodes' Lease interval, or 0 for %s", w.NodeMonitorGracePeriod, DefaultNodeMonitorGracePeriod)
	}
	for _, n := range w.ServingNames {
		if net.ParseIP(n) == nil && len(validation.IsDNS1123Subdomain(n)) != 0 {
			return fmt.Errorf("Workload.ServingNames: %q is neither an IP address nor a DNS name", n)
		}
	}
	return nil
}

// servingNames is nil for anvil's own control planes (w is nil).
func (w *Workload) servingNames() []string {
	if w == nil {
		return nil
	}
	return w.ServingNames
}

// authorizationMode puts the Node authorizer before RBAC for a workload cluster, as kubeadm
// does: a node may then read and write only what belongs to it.
func (w *Workload) authorizationMode() string {
	if w == nil {
		return "RBAC"
	}
	return "Node,RBAC"
}

func (w *Workload) controllers() []string {
	if w.Controllers == nil {
		return workloadControllers
	}
	return w.Controllers
}

func (w *Workload) gracePeriod() time.Duration {
	if w.NodeMonitorGracePeriod == 0 {
		return DefaultNodeMonitorGracePeriod
	}
	return w.NodeMonitorGracePeriod
}

// workloadAPIServerArgs let nodes in: bootstrap tokens, client certificates of the cluster
// CA (which kube-controller-manager signs the nodes' requests with), and NodeRestriction so
// a node modifies only its own Node and Lease. The apiserver presents its kubelet client
// certificate to a real kubelet for logs, exec and port-forward, dialling the Node's
// InternalIP first: its host name need not resolve (and would be asked of the host's DNS).
// Privileged containers are allowed, as in any cluster anvil installs into: the qemu
// runtime's DaemonSet is one.
func workloadAPIServerArgs(p pki) []string {
	return []string{
		"--enable-bootstrap-token-auth",
		"--client-ca-file=" + p.caCert(),
		"--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate=" + p.kubeletClientCert(),
		"--kubelet-client-key=" + p.kubeletClientKey(),
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--allow-privileged=true",
	}
}

// kubeletClientUser is the apiserver's identity towards kubelets; RBAC lets it use the
// kubelet API (nodeBootstrapBindings), as kubeadm's apiserver-kubelet-client.
const kubeletClientUser = "kube-apiserver-kubelet-client"

func (p pki) kubeletClientCert() string { return filepath.Join(p.dir, "apiserver-kubelet-client.crt") }
func (p pki) kubeletClientKey() string  { return filepath.Join(p.dir, "apiserver-kubelet-client.key") }

// writeKubeletClient makes the apiserver's kubelet client certificate anew at every start,
// like etcd's: nothing but the apiserver ever holds it.
func (p pki) writeKubeletClient(now time.Time) error {
	return issue(p.caCert(), p.caKey(), p.kubeletClientCert(), p.kubeletClientKey(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: kubeletClientUser},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now)
}

// ClientConfig is a client configuration that authenticates to this Workload control plane
// as user in groups, with a new client certificate of the cluster CA (the apiserver takes
// those only in a Workload): the identity of a kubelet ("system:node:NAME" in
// "system:nodes") or kube-proxy ("system:kube-proxy") started beside it. The key and
// certificate are kept in the state directory.
func (cp *ControlPlane) ClientConfig(user string, groups ...string) (*rest.Config, error) {
	if cp.cfg.Workload == nil {
		return nil, fmt.Errorf("client certificates are taken only by a Workload control plane")
	}
	dir := filepath.Join(cp.pki.dir, "clients")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	name := strings.NewReplacer(":", "_", "/", "_").Replace(user)
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := issue(cp.pki.caCert(), cp.pki.caKey(), certPath, keyPath, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, time.Now()); err != nil {
		return nil, fmt.Errorf("issuing a client certificate for %s: %w", user, err)
	}
	cfg := rest.AnonymousClientConfig(cp.rest)
	var err error
	if cfg.CertData, err = os.ReadFile(certPath); err != nil {
		return nil, err
	}
	if cfg.KeyData, err = os.ReadFile(keyPath); err != nil {
		return nil, err
	}
	return cfg, nil
}

// CAFile is the cluster CA's certificate: the issuer of the apiserver's serving certificate
// and, in a Workload, of every client certificate it takes (a kubelet trusts the apiserver's
// kubelet client certificate through it).
func (cp *ControlPlane) CAFile() string { return cp.pki.caCert() }

func (p pki) controllerManagerCert() string { return filepath.Join(p.dir, "controller-manager.crt") }
func (p pki) controllerManagerKey() string  { return filepath.Join(p.dir, "controller-manager.key") }

func (cp *ControlPlane) controllerManagerKubeconfig() string {
	return filepath.Join(cp.cfg.StateDir, "controller-manager.kubeconfig")
}

func (cp *ControlPlane) controllerManagerArgs() []string {
	p, w := cp.pki, cp.cfg.Workload
	grace := w.gracePeriod().String()
	return []string{
		"--kubeconfig=" + cp.controllerManagerKubeconfig(),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(w.ControllerManagerPort),
		"--tls-cert-file=" + p.controllerManagerCert(),
		"--tls-private-key-file=" + p.controllerManagerKey(),
		"--leader-elect=false",
		"--controllers=" + strings.Join(w.controllers(), ","),
		"--cluster-signing-cert-file=" + p.caCert(),
		"--cluster-signing-key-file=" + p.caKey(),
		// Only used when Controllers runs them: the kube-root-ca.crt ConfigMap every Pod
		// mounts, and service-account token Secrets.
		"--root-ca-file=" + p.caCert(),
		"--service-account-private-key-file=" + p.saKey(),
		"--node-monitor-period=" + nodeMonitorPeriod.String(),
		"--node-monitor-grace-period=" + grace,
		"--node-startup-grace-period=" + grace,
	}
}

// startWorkload starts kube-controller-manager with the admin's credentials, waits for its
// /healthz, and sets up the RBAC that lets bootstrap tokens register nodes.
func (cp *ControlPlane) startWorkload(ctx context.Context, bin string) error {
	p := cp.pki
	// Made anew at every start, like etcd's: it only serves the health check.
	if err := issue(p.caCert(), p.caKey(), p.controllerManagerCert(), p.controllerManagerKey(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-controller-manager"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}, time.Now()); err != nil {
		return fmt.Errorf("creating kube-controller-manager's serving certificate: %w", err)
	}
	if err := WriteKubeconfig(cp.controllerManagerKubeconfig(), cp.rest); err != nil {
		return fmt.Errorf("writing kube-controller-manager's kubeconfig: %w", err)
	}
	caPEM, err := os.ReadFile(p.caCert())
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	health := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}

	logs, run := filepath.Join(cp.cfg.StateDir, "logs"), filepath.Join(cp.cfg.StateDir, "run")
	if cp.controllerManager, err = StartProcess("kube-controller-manager", bin, cp.controllerManagerArgs(), logs, run); err != nil {
		return err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", cp.cfg.Workload.ControllerManagerPort)
	if err := waitHealthy(ctx, cp.controllerManager, health, url, cp.cfg.ReadyTimeout); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cp.rest)
	if err != nil {
		return err
	}
	return ensureNodeBootstrapRBAC(ctx, cs)
}
