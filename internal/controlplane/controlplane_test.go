package controlplane

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/anvil-dev/anvil/test/harness"
)

func testConfig(t *testing.T, stateDir string) Config {
	t.Helper()
	bin, err := harness.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	return Config{StateDir: stateDir, BinDir: bin, APIServerPort: harness.FreePort(t), EtcdClientPort: harness.FreePort(t), EtcdPeerPort: harness.FreePort(t)}
}

// One control plane is started twice on one state directory: what the first wrote, the
// second serves, and the kubeconfig from the first start still works.
func TestRestartKeepsObjectsAndKubeconfig(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	cp, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	etcdPID, apiserverPID := cp.PIDs()
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{etcdPID, apiserverPID} {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
			t.Errorf("process %d still exists after Stop", pid)
		}
	}
	if pids, _ := filepath.Glob(filepath.Join(cfg.StateDir, "run", "*.pid")); len(pids) != 0 {
		t.Errorf("pid files left after Stop: %v", pids)
	}

	cp, err = Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	kc, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(cp.KubeconfigPath())
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode %v (err %v), want 0600: it holds the admin token", info.Mode().Perm(), err)
	}
	if _, err := kubernetes.NewForConfigOrDie(kc).CoreV1().Namespaces().Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace created before the restart: %v", err)
	}
}

func TestRefusesBusyPort(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg.APIServerPort = l.Addr().(*net.TCPAddr).Port
	_, err = Start(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), "--apiserver-port") {
		t.Fatalf("err = %v, want one saying the port is in use and naming --apiserver-port", err)
	}
}

func TestRefusesMissingBinary(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.BinDir = t.TempDir()
	_, err := Start(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "etcd not found") || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("err = %v, want one naming the missing binary and \"make tools\"", err)
	}
}

func TestRefusesStateDirInUse(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	held, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, err = Start(context.Background(), testConfig(t, dir))
	if err == nil || !strings.Contains(err.Error(), "in use by another anvil dev") {
		t.Fatalf("err = %v, want one saying the state directory is in use", err)
	}
}

// kube-apiserver killed with SIGKILL comes back on RestartAPIServer, with what was written
// before; asked while it still runs, RestartAPIServer refuses.
func TestRestartAPIServerAfterAKill(t *testing.T) {
	ctx := context.Background()
	cp, err := Start(ctx, testConfig(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	if err := cp.RestartAPIServer(ctx); err == nil {
		t.Fatal("RestartAPIServer started a second kube-apiserver beside a running one")
	}
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "before-the-kill"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, old := cp.PIDs()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-cp.apiserver.done
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, now := cp.PIDs(); now == old {
		t.Fatalf("kube-apiserver pid %d after the restart, the killed one's", now)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "before-the-kill", metav1.GetOptions{}); err != nil {
		t.Fatalf("the namespace written before the kill: %v", err)
	}
}

// With AuditLog set, kube-apiserver logs each write once, naming the client, and nothing
// else: no read, and no request's body (a Secret's value stays out of the log).
func TestAuditLogHasWritesAndNoBodies(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	cfg.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	cp, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	rc := cp.RESTConfig()
	rc.UserAgent = "audit-test/v1"
	cs := kubernetes.NewForConfigOrDie(rc)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "audited", Namespace: "default"},
		StringData: map[string]string{"password": "not-in-the-audit-log"}}
	if _, err := cs.CoreV1().Secrets("default").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets("default").Get(ctx, "audited", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Stop(); err != nil { // flushes the log
		t.Fatal(err)
	}
	log, err := os.ReadFile(cfg.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	var creates int
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		if strings.Contains(line, `"userAgent":"audit-test/v1"`) {
			if !strings.Contains(line, `"verb":"create"`) || !strings.Contains(line, `"name":"audited"`) {
				t.Errorf("the test's client has an audit event other than its create: %s", line)
			}
			creates++
		}
		if strings.Contains(line, `"verb":"get"`) || strings.Contains(line, `"verb":"list"`) || strings.Contains(line, `"verb":"watch"`) {
			t.Errorf("a read in the audit log: %s", line)
		}
	}
	if creates != 1 {
		t.Errorf("%d audit events of the test's create, want 1:\n%s", creates, log)
	}
	if strings.Contains(string(log), "not-in-the-audit-log") || strings.Contains(string(log), "bm90LWluLXRoZS1hdWRpdC1sb2c") {
		t.Error("the Secret's value is in the audit log")
	}
}
