package broker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	"github.com/anvil-dev/anvil/config/rbac/brokeridentity"
	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/testos"
)

// brokerNamespace is the namespace each site gives the region's broker.
const brokerNamespace = "region"

// site is one anvil dev: the region or a site.
type site struct {
	name       string
	state      string
	registry   string // host:port of its registry
	kubeconfig string // admin
	dev        *devproc.Dev
	cfg        *rest.Config
	c          client.Client
}

// startSite runs anvil dev on free loopback ports with its own state folder and the test
// OS in its registry; args choose its pools. Its QEMU guests, which outlive anvil dev by
// design, are killed in the test's cleanup.
func startSite(t *testing.T, name string, args ...string) *site {
	t.Helper()
	s := &site{name: name, state: shortDir(t, "anvil-"+name+"-")}
	port := devproc.FreePort(t)
	s.registry = "127.0.0.1:" + port
	t.Cleanup(func() { devproc.KillQemu(s.state) })
	s.dev = env.StartDev(t, append([]string{"--state-dir", s.state, "--bin-dir", env.BinDir,
		"--apiserver-port", devproc.FreePort(t), "--etcd-port", devproc.FreePort(t), "--etcd-peer-port", devproc.FreePort(t),
		"--registry-port", port, "--test-os", testos.Dir(t)}, args...)...)
	t.Logf("%s is up after %s", name, s.dev.UpAfter)
	// Cleanups run last registered first: the brokers and poollets started later stop
	// before anvil dev, so their watches do not hold up kube-apiserver's shutdown.
	t.Cleanup(func() {
		// A test that failed while the apiserver was stopped must not leave it stopped.
		if pid, err := devproc.PIDFile(filepath.Join(s.state, "run", "kube-apiserver.pid")); err == nil {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		s.dev.Stop(syscall.SIGTERM)
	})
	s.kubeconfig = filepath.Join(s.state, "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// A hundred Machines are read and written at once: no client-side throttling.
	cfg.QPS, cfg.Burst = 200, 400
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if s.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	s.cfg = cfg
	return s
}

// readCredentials is the docker config of the site's pools' read credential, which anvil
// dev writes beside its kubeconfig: its registry refuses anonymous reads.
func (s *site) readCredentials() string { return filepath.Join(s.state, "registry-read.json") }

// testOS is the test OS image anvil dev published in the site's own registry.
func (s *site) testOS() string { return s.registry + "/anvil/testos:latest" }

func (s *site) apiserverPID(t *testing.T) int {
	t.Helper()
	pid, err := devproc.PIDFile(filepath.Join(s.state, "run", "kube-apiserver.pid"))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func (s *site) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := env.Kubectl(t, s.kubeconfig, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %v in %s: %v\n%s", args, s.name, err, out)
	}
	return out
}

func (s *site) apply(t *testing.T, objects string) { s.kubectl(t, objects, "apply", "-f", "-") }

// wait runs kubectl in the site until its trimmed output is want.
func (s *site) wait(t *testing.T, limit time.Duration, want string, args ...string) {
	t.Helper()
	env.WaitKubectlFor(t, s.kubeconfig, limit, "be "+strconv.Quote(want), func(out string) bool { return out == want }, args...)
}

// brokerIdentity makes the site's namespace for the region's broker of pool and writes
// the broker's kubeconfig: the ServiceAccount of config/rbac/broker, token only.
func (s *site) brokerIdentity(t *testing.T, pool string) string {
	t.Helper()
	ctx := context.Background()
	if err := client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: brokerNamespace}})); err != nil {
		t.Fatal(err)
	}
	cfg, err := brokeridentity.Identity(ctx, s.cfg, brokerNamespace, pool, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), pool+"-broker.kubeconfig")
	if err := controlplane.WriteKubeconfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// brokerPool is one pool of the region whose machines live in a site: an `anvil runtime
// broker` and its `anvil poollet`, as processes, as a region host runs them.
type brokerPool struct {
	name       string
	kubeconfig string // the broker's, downstream
	args       []string
	proc       *controlplane.Process
}

// startBrokerPool runs the region's pool name as a broker into site down, labelled
// anvil.test/site=name, and waits until the pool is Ready in the region.
func startBrokerPool(t *testing.T, region, down *site, name string) *brokerPool {
	t.Helper()
	b := &brokerPool{name: name, kubeconfig: down.brokerIdentity(t, name)}
	dir := shortDir(t, "ab")
	socket := "unix://" + filepath.Join(dir, "mri.sock")
	b.args = []string{"runtime", "broker", "--kubeconfig", b.kubeconfig, "--namespace", brokerNamespace, "--pool", name,
		"--listen", socket, "--cache-dir", filepath.Join(dir, "cache"),
		"--allow-registry", down.registry, "--registry-credentials", down.readCredentials()}
	b.start(t)
	t.Cleanup(func() { devproc.StopProcess(b.proc) })
	// The region's console API reaches the pool's consoles here, the broker passes them to
	// the site's console API (docs/console.md).
	poolletCmd := exec.Command(env.AnvilBin, "poollet", "--pool", name, "--runtime", socket, "--interval", "1s",
		"--console-address", "127.0.0.1:0", "--labels", "anvil.test/site="+name, "--allow-registry", down.registry, "--registry-credentials", down.readCredentials())
	poolletCmd.Env = append(os.Environ(), "KUBECONFIG="+region.kubeconfig)
	poollet := devproc.StartProcess(t, poolletCmd)
	t.Cleanup(func() { devproc.StopProcess(poollet) })
	region.wait(t, 2*time.Minute, "True", "get", "machinepool", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	return b
}

// start runs the broker process (again, after a kill).
func (b *brokerPool) start(t *testing.T) {
	t.Helper()
	b.proc = devproc.Background(t, env.AnvilBin, b.args...)
}

// kill ends the broker as a crash would.
func (b *brokerPool) kill(t *testing.T) {
	t.Helper()
	b.proc.Kill()
}

// shortDir is a fresh folder with a short path: QMP and MRI socket paths must stay under
// Linux's 108-byte limit, which t.TempDir's long names can exceed.
func shortDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
