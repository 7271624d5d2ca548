package nodeagent_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/test/nodeagent"
	"github.com/anvil-dev/anvil/test/nodeagent/nodeagenttest"
)

// Short, so a stopped agent is noticed soon; the agent renews its Lease five times within it.
const (
	grace         = 10 * time.Second
	leaseInterval = 2 * time.Second
)

// agentProc is one anvil-node-agent started as a host process.
type agentProc struct {
	cmd    *exec.Cmd
	lines  chan string // stdout
	stderr *strings.Builder
	mu     sync.Mutex
	done   chan struct{}
}

func (p *agentProc) errText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// startAgent runs the agent with args; it is killed (by PID) when the test ends.
func startAgent(t *testing.T, args ...string) *agentProc {
	t.Helper()
	bin := filepath.Join(nodeagenttest.BuildAgents(t, runtime.GOARCH), runtime.GOARCH, nodeagenttest.BinaryName)
	p := &agentProc{cmd: exec.Command(bin, args...), lines: make(chan string, 100), stderr: &strings.Builder{}, done: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	go func() {
		readers.Wait()
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		t.Logf("agent %v stderr:\n%s", args, p.errText())
	})
	return p
}

// awaitLine waits for a stdout line of the agent.
func (p *agentProc) awaitLine(t *testing.T, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l := <-p.lines:
			if l == want {
				return
			}
		case <-p.done:
			t.Fatalf("the agent exited (%v) before printing %q; stderr:\n%s", p.cmd.ProcessState, want, p.errText())
		case <-deadline:
			t.Fatalf("no %q from the agent within %s; stderr:\n%s", want, within, p.errText())
		}
	}
}

// awaitExit waits for the agent to end and returns its exit code.
func (p *agentProc) awaitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("the agent still runs after %s; stderr:\n%s", within, p.errText())
		return -1
	}
}

// workload is a workload control plane, its admin client and what an agent's flags need.
type workload struct {
	cp     *controlplane.ControlPlane
	admin  kubernetes.Interface
	caFile string
}

func startWorkload(t *testing.T) *workload {
	t.Helper()
	cp := nodeagenttest.StartWorkload(t, controlplane.Workload{NodeMonitorGracePeriod: grace})
	return &workload{cp: cp, admin: kubernetes.NewForConfigOrDie(cp.RESTConfig()), caFile: nodeagenttest.WriteCA(t, cp)}
}

func (w *workload) token(t *testing.T, expires time.Time) string {
	t.Helper()
	token, err := controlplane.CreateBootstrapToken(context.Background(), w.admin, expires)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// agentArgs are the flags of an agent for node with token; the provider ID comes from a
// NoCloud meta-data file, as in a guest.
func (w *workload) agentArgs(t *testing.T, node, token string, more ...string) []string {
	t.Helper()
	dir := t.TempDir()
	meta := filepath.Join(dir, "meta-data")
	if err := os.WriteFile(meta, fmt.Appendf(nil, "instance-id: \"i-%s\"\nprovider-id: \"anvil://tenant/%s\"\n", node, node), 0o600); err != nil {
		t.Fatal(err)
	}
	return append([]string{"--server", w.cp.RESTConfig().Host, "--ca-file", w.caFile, "--token", token,
		"--node-name", node, "--metadata", meta, "--cert-dir", filepath.Join(dir, "pki"),
		"--lease-interval", leaseInterval.String()}, more...)
}

// selfSignedPEM is a CA certificate of nothing the apiserver knows.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func ready(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// The agent, a host process with a bootstrap token, makes its own Node: its certificate
// request is the bootstrap token's and was approved by kube-controller-manager, the Node
// carries the provider ID of the metadata and the arch/os/hostname labels, is Ready with no
// pressure, and its Lease is renewed: it stays Ready past the grace period. Stopped with
// SIGTERM it exits 0 without touching the Node, and kube-controller-manager marks it
// NotReady (Ready=Unknown) within the grace period. Started again it is Ready again.
func TestAgentRegistersItsNodeAndGoesNotReadyWhenStopped(t *testing.T) {
	ctx := context.Background()
	w := startWorkload(t)
	token := w.token(t, time.Now().Add(time.Hour))
	agent := startAgent(t, w.agentArgs(t, "node-a", token, "--labels", "anvil.dev/pool=blue")...)
	agent.awaitLine(t, nodeagent.RegisteredLine("node-a", "anvil://tenant/node-a"), 60*time.Second)

	node, err := w.admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Spec.ProviderID != "anvil://tenant/node-a" {
		t.Errorf("providerID %q, want the metadata's anvil://tenant/node-a", node.Spec.ProviderID)
	}
	for k, v := range map[string]string{"kubernetes.io/arch": runtime.GOARCH, "kubernetes.io/os": "linux", "kubernetes.io/hostname": "node-a", "anvil.dev/pool": "blue"} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if node.Status.NodeInfo.Architecture != runtime.GOARCH || node.Status.NodeInfo.OperatingSystem != "linux" {
		t.Errorf("nodeInfo %+v, want architecture %s, linux", node.Status.NodeInfo, runtime.GOARCH)
	}
	want := map[corev1.NodeConditionType]corev1.ConditionStatus{corev1.NodeReady: corev1.ConditionTrue,
		corev1.NodeMemoryPressure: corev1.ConditionFalse, corev1.NodeDiskPressure: corev1.ConditionFalse, corev1.NodePIDPressure: corev1.ConditionFalse}
	for _, c := range node.Status.Conditions {
		if s, ok := want[c.Type]; ok && s == c.Status && c.Reason != "" {
			delete(want, c.Type)
		}
	}
	if len(want) != 0 {
		t.Errorf("conditions %+v miss %v", node.Status.Conditions, want)
	}
	managers := map[string]bool{}
	for _, mf := range node.ManagedFields {
		managers[mf.Manager] = true
	}
	if len(managers) == 0 || !managers["anvil-node-agent"] {
		t.Errorf("the Node's field managers %v, want anvil-node-agent (the agent wrote it)", managers)
	}
	id, _, _ := strings.Cut(token, ".")
	csrs, err := w.admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(csrs.Items) != 1 {
		t.Fatalf("%d certificate requests, want the agent's one", len(csrs.Items))
	}
	csr := csrs.Items[0]
	approved := false
	for _, c := range csr.Status.Conditions {
		approved = approved || (c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue)
	}
	if csr.Spec.Username != "system:bootstrap:"+id || csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || !approved || len(csr.Status.Certificate) == 0 {
		t.Errorf("certificate request by %s for %s, approved %v, %d certificate bytes; want the bootstrap token's, kubelet client, approved and signed",
			csr.Spec.Username, csr.Spec.SignerName, approved, len(csr.Status.Certificate))
	}

	// Alive: Ready past the grace period, the Lease renewed.
	lease, err := w.admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the node's Lease: %v", err)
	}
	for end := time.Now().Add(grace + 3*time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		n, err := w.admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s := ready(n); s != corev1.ConditionTrue {
			t.Fatalf("Node node-a went Ready=%s while its agent runs; stderr:\n%s", s, agent.errText())
		}
	}
	renewed, err := w.admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !renewed.Spec.RenewTime.After(lease.Spec.RenewTime.Time) || *renewed.Spec.HolderIdentity != "node-a" {
		t.Errorf("Lease renewed at %v (held by %s), first seen at %v: not renewed", renewed.Spec.RenewTime, *renewed.Spec.HolderIdentity, lease.Spec.RenewTime)
	}

	// Stopped: nothing marked by the agent, NotReady from kube-controller-manager.
	stoppedAt := time.Now()
	if err := agent.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := agent.awaitExit(t, 10*time.Second); code != 0 {
		t.Fatalf("the agent exited %d on SIGTERM, want 0", code)
	}
	n, err := w.admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := ready(n); s != corev1.ConditionTrue {
		t.Errorf("right after SIGTERM the Node is Ready=%s: the agent must not mark it", s)
	}
	for {
		n, err := w.admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ready(n) == corev1.ConditionUnknown {
			t.Logf("Node node-a Ready=Unknown %s after its agent stopped (grace period %s, lease interval %s)", time.Since(stoppedAt).Round(100*time.Millisecond), grace, leaseInterval)
			break
		}
		if time.Since(stoppedAt) > grace+leaseInterval+5*time.Second {
			t.Fatalf("Node node-a still Ready=%s %s after its agent stopped (grace period %s)", ready(n), time.Since(stoppedAt), grace)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// Rebooted (a fresh root: no kept certificate): it bootstraps again with the token, takes
	// its Node over and it is Ready again. Another machine claiming the name with another
	// provider ID is refused.
	again := startAgent(t, w.agentArgs(t, "node-a", token)...)
	again.awaitLine(t, nodeagent.RegisteredLine("node-a", "anvil://tenant/node-a"), 60*time.Second)
	if n, err := w.admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil || ready(n) != corev1.ConditionTrue {
		t.Errorf("Node node-a after its agent came back: %v, Ready=%s; want True", err, ready(n))
	}
	impostor := startAgent(t, w.agentArgs(t, "node-a", token, "--provider-id", "anvil://tenant/other")...)
	if code := impostor.awaitExit(t, 60*time.Second); code != 1 || !strings.Contains(impostor.errText(), "a Node node-a exists with provider ID anvil://tenant/node-a, not anvil://tenant/other") {
		t.Errorf("an agent of another provider ID for node-a exited %d; stderr:\n%s\nwant 1 and the reason", code, impostor.errText())
	}
}

// A bootstrap token that is wrong (well-formed, unknown), expired, or not a token at all is
// refused, and so is an apiserver whose certificate is not of the given CA, and a label a
// node may not give itself: the agent exits 1 saying so (at once, no retrying), and no Node
// exists.
func TestAgentExitsOnRefusals(t *testing.T) {
	ctx := context.Background()
	w := startWorkload(t)
	expired := w.token(t, time.Now().Add(-time.Minute))
	good := w.token(t, time.Now().Add(time.Hour))
	otherCA := filepath.Join(t.TempDir(), "other-ca.crt")
	if err := os.WriteFile(otherCA, selfSignedPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token, want string
		more              []string
	}{
		{"wrong", "abcdef.0123456789abcdef", "refused the bootstrap token (401 Unauthorized): it is wrong, expired or deleted", nil},
		{"expired", expired, "refused the bootstrap token (401 Unauthorized): it is wrong, expired or deleted", nil},
		{"malformed", "not-a-token", "--token: not a bootstrap token", nil},
		{"untrusted", good, "the apiserver's serving certificate is not trusted", []string{"--ca-file", otherCA}},
		{"forbidden-label", good, "the apiserver refused to create Node node-forbidden-label as system:node:node-forbidden-label (NodeRestriction",
			[]string{"--labels", "node-role.kubernetes.io/control-plane="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent := startAgent(t, w.agentArgs(t, "node-"+tc.name, tc.token, tc.more...)...)
			if code := agent.awaitExit(t, 60*time.Second); code != 1 {
				t.Fatalf("exit code %d, want 1", code)
			}
			if !strings.Contains(agent.errText(), tc.want) {
				t.Errorf("stderr:\n%s\nwant it to say %q", agent.errText(), tc.want)
			}
			if _, err := w.admin.CoreV1().Nodes().Get(ctx, "node-"+tc.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("Node node-%s: err = %v, want NotFound", tc.name, err)
			}
		})
	}
}

// With the credentials the agent got (its kept certificate), node A can change its own Node
// but not node B's, nor B's status or Lease: the apiserver answers 403 (Node authorizer and
// NodeRestriction).
func TestAgentCannotModifyAnotherNode(t *testing.T) {
	ctx := context.Background()
	w := startWorkload(t)
	token := w.token(t, time.Now().Add(time.Hour))
	argsA := w.agentArgs(t, "node-a", token)
	a := startAgent(t, argsA...)
	b := startAgent(t, w.agentArgs(t, "node-b", token)...)
	a.awaitLine(t, nodeagent.RegisteredLine("node-a", "anvil://tenant/node-a"), 60*time.Second)
	b.awaitLine(t, nodeagent.RegisteredLine("node-b", "anvil://tenant/node-b"), 60*time.Second)

	var certDir string
	for i, arg := range argsA {
		if arg == "--cert-dir" {
			certDir = argsA[i+1]
		}
	}
	cfg := rest.AnonymousClientConfig(w.cp.RESTConfig())
	cfg.CertFile, cfg.KeyFile = filepath.Join(certDir, "node.crt"), filepath.Join(certDir, "node.key")
	asA := kubernetes.NewForConfigOrDie(cfg)

	label := []byte(`{"metadata":{"labels":{"anvil.dev/touched":"yes"}}}`)
	if _, err := asA.CoreV1().Nodes().Patch(ctx, "node-a", types.MergePatchType, label, metav1.PatchOptions{}); err != nil {
		t.Fatalf("node A labelling its own Node: %v (its credentials do not work)", err)
	}
	attempts := map[string]func() error{
		"label node B": func() error {
			_, err := asA.CoreV1().Nodes().Patch(ctx, "node-b", types.MergePatchType, label, metav1.PatchOptions{})
			return err
		},
		"mark node B NotReady": func() error {
			st := []byte(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Hijacked"}]}}`)
			_, err := asA.CoreV1().Nodes().Patch(ctx, "node-b", types.StrategicMergePatchType, st, metav1.PatchOptions{}, "status")
			return err
		},
		"delete node B": func() error { return asA.CoreV1().Nodes().Delete(ctx, "node-b", metav1.DeleteOptions{}) },
		"renew node B's Lease": func() error {
			l, err := w.admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-b", metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("reading it as admin: %w", err)
			}
			_, err = asA.CoordinationV1().Leases("kube-node-lease").Update(ctx, l, metav1.UpdateOptions{})
			return err
		},
	}
	for what, try := range attempts {
		err := try()
		if !apierrors.IsForbidden(err) {
			t.Errorf("node A tried to %s: err = %v, want 403 Forbidden", what, err)
			continue
		}
		t.Logf("node A tried to %s: %v", what, err)
	}
	n, err := w.admin.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
	if err != nil || n.Labels["anvil.dev/touched"] != "" || ready(n) != corev1.ConditionTrue {
		t.Errorf("node B after node A's attempts: %v, labels %v, Ready=%s; want untouched", err, n.Labels, ready(n))
	}
}
